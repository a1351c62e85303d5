# frozen_string_literal: true

# The workloads bench/overhead.rb (heap and GC profilers) and
# bench/cpu_overhead.rb (CPU/wall) share: issue 29 asks for the same
# allocation-heavy and deep-stack loops in both. `scale` multiplies the
# work (cpu_overhead's --scale); overhead.rb runs them at 1.
module BenchWorkloads
  module_function

  # Issue 29's loop: 2M iterations each making a Hash, two Strings and an
  # Array (~5 objects, a few of them malloc'd), 1% kept to the end, so GC
  # runs often and promotes: what an allocation-heavy request looks like.
  def alloc_mixed(scale = 1)
    kept = []
    i = 0
    while i < 2_000_000 * scale
      s = "item #{i}"
      h = { id: i, name: s, tags: [s, "t"] }
      kept << h if i % 100 == 0
      i += 1
    end
    kept.size
  end

  # A Rails-deep stack (~150 method frames) allocating small strings, none
  # kept: what a stack capture costs when stacks are deep (each capture
  # walks every frame).
  def deep_alloc(scale = 1)
    deep = Object.new
    def deep.down(depth, n)
      return Array.new(n) { |k| "s#{k}" }.size if depth.zero?

      down(depth - 1, n)
    end
    (300 * scale).times { deep.down(150, 10_000) }
  end
end
