# frozen_string_literal: true

require_relative "trend"
require_relative "theil_sen"
require_relative "rules"

module Fathom
  module Leaks
    # Whether the process grows, and whether Ruby objects explain it, from
    # the memory line each window carries (Memory) and the windows' in-use
    # bytes of Ruby objects:
    #
    #   :none           RSS does not grow (or too few windows say so)
    #   :ruby           RSS grows and Ruby objects account for at least
    #                   half of it: the site verdicts are the answer
    #   :outside_ruby   RSS grows, Ruby objects do not explain it and
    #                   malloc's in-use bytes do: C extensions, or memory
    #                   Ruby does not account as objects
    #   :fragmentation  RSS grows, malloc's in-use bytes do not, the free
    #                   bytes inside its arenas do
    #   :ruby_heap      Ruby's heap pages grow with no Ruby objects in them
    #   :unexplained    none of the above (mmap by a library, thread stacks)
    #   :unknown        the windows carry no memory line
    #
    # A native growth is never pinned on a Ruby site: the sites are judged
    # on their own series (Trend), this only on the process's.
    module NativeGrowth
      Result = Struct.new(:kind, :windows, :rss_first, :rss_last, :rss_growth, :ruby_growth, :malloc_growth,
                          :free_growth, :heap_growth, :rss_rate, :rss_low, :rss_high, :confidence, :span,
                          :classification, keyword_init: true) do
        # Whether the process grows in a way the Ruby sites do not answer:
        # a finding (a log line, exit status 3). Not :ruby_heap: Ruby's GC
        # sizes its heap for the peak of live slots plus its free-slot
        # goal, so pages without objects follow a peak the sites saw and
        # stop growing with it; under churn that warm-up can outlast the
        # windows (a bounded LRU's sampled run on Ruby 3.3: +6.7 MB of
        # pages over 16 windows). It is said, not counted.
        def outside_ruby?
          %i[outside_ruby fragmentation unexplained].include?(kind)
        end

        def growing?
          kind != :none && kind != :unknown
        end
      end

      # RSS must grow by this much (and RSS_SHARE of the first RSS) over
      # the windows before the process is said to grow.
      RSS_BYTES = 8 << 20
      RSS_SHARE = 0.1
      EXPLAINED = 0.5
      # The process's growth needs twice the windows a site's does: RSS
      # also grows while a process warms up (Ruby's heap, malloc's arenas,
      # caches, the profiler's own tables), which a site's series does not
      # see, and that growth slows over a few dozen windows.
      WINDOWS_FACTOR = 2

      module_function

      # history: a History; rules: the Rules of the site verdicts (their
      # min_windows, alpha, z; the byte thresholds are the process's own).
      def analyze(history, rules: Rules.new)
        idx = history.memory.each_index.select { |i| history.memory[i]&.key?(:rss) }
        return Result.new(kind: :unknown, windows: idx.size) if idx.size < 2

        t = idx.map { |i| history.times[i] }
        rss = idx.map { |i| history.memory[i][:rss].to_f }
        min_windows = [rules.min_windows * WINDOWS_FACTOR, Rules::MIN_WINDOWS_RANGE.end].min
        own = Rules.new(**rules.to_h, min_windows: min_windows, min_bytes: RSS_BYTES.to_f, min_share: RSS_SHARE)
        cls = Trend.classify(Trend::Points.new(t, rss, Array.new(rss.size, 0.0)), rules: own, heap_bytes: rss.first)
        seg = (cls.first..(idx.size - 1))
        span = t[seg.end] - t[seg.begin]
        # Growth over the segment, by window number (as Trend judges).
        growth = lambda do |values|
          pts = seg.map { |k| [k.to_f, values[k]] }.reject { |_, v| v.nil? }
          next nil if pts.size < 2

          TheilSen.fit(pts.map(&:first), pts.map { |_, v| v.to_f }).slope * (seg.size - 1)
        end
        base = { windows: cls.windows, rss_first: rss[seg.begin], rss_last: rss.last, rss_growth: cls.growth,
                 rss_rate: cls.rate, rss_low: cls.low, rss_high: cls.high, confidence: cls.confidence, span: span,
                 classification: cls }
        ruby = growth.call(idx.map { |i| history.totals[i] })
        malloc = growth.call(idx.map { |i| history.memory[i][:malloc_in_use] })
        free = growth.call(idx.map { |i| history.memory[i][:malloc_free] })
        heap = growth.call(idx.map { |i| history.memory[i][:ruby_heap] })
        figures = { ruby_growth: ruby, malloc_growth: malloc, free_growth: free, heap_growth: heap }
        return Result.new(kind: :none, **base, **figures) unless cls.leak?

        rss_growth = base[:rss_growth]
        outside = rss_growth - [ruby.to_f, 0.0].max
        kind =
          if ruby.to_f >= EXPLAINED * rss_growth || !unexplained_grows?(history, idx, t, rss, own) then :ruby
          elsif malloc && malloc >= EXPLAINED * outside then :outside_ruby
          elsif free && free >= EXPLAINED * outside then :fragmentation
          elsif heap && heap >= EXPLAINED * outside then :ruby_heap
          else :unexplained
          end
        Result.new(kind: kind, **base, **figures)
      end

      # Whether what RSS holds beyond the Ruby objects (RSS minus the
      # window's in-use bytes of every site) grows by itself, judged as RSS
      # is. A Ruby leak grows RSS by more than its objects: malloc's arenas
      # and the profiler's own tables grow by steps (a table that doubles
      # frees the old one into the arena), which a slope over a few dozen
      # windows reads as growth. Measured on the steady leak in exact mode
      # (Ruby 3.1): RSS +14.1 MB over 26 windows against Ruby objects
      # +5.1 MB, most of the rest one step of 7.6 MB at window 9, after
      # which RSS - Ruby stays flat; a native leak's difference grows every
      # window. Without Ruby totals in every window (an old file) the
      # shares alone decide.
      def unexplained_grows?(history, idx, t, rss, rules)
        ruby = idx.map { |i| history.totals[i] }
        return true if ruby.any?(&:nil?)

        rest = rss.each_with_index.map { |v, k| v - ruby[k].to_f }
        cls = Trend.classify(Trend::Points.new(t, rest, Array.new(rest.size, 0.0)), rules: rules, heap_bytes: rss.first)
        return false unless cls.leak?

        # And grows window after window, not by a few steps: the median
        # window's rise, over the segment, must itself reach the threshold.
        # Memory that leaks grows with the work, every window; a table that
        # doubles or an arena that is mapped grows at a few windows and not
        # between, and a slope over steps at windows 2, 9 and 22 (the double
        # leak in exact mode on Ruby 3.4) read as growth.
        rises = rest[cls.first..].each_cons(2).map { |a, b| b - a }.sort
        median = rises.size.odd? ? rises[rises.size / 2] : (rises[rises.size / 2 - 1] + rises[rises.size / 2]) / 2.0
        median * rises.size >= rules.min_bytes
      end
    end
  end
end
