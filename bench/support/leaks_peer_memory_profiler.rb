# frozen_string_literal: true

# bench/leaks_peers.rb's adapter for socketry's memory-profiler
# (Memory::Profiler, Ruby 3.3+), used as its getting-started guide and
# Rack guide use it: Sampler.new(depth: 10, increases_threshold: 10),
# start, then Sampler#sample! periodically (the guide's run(interval: 60)
# loop calls sample! each interval; here it is called once after each
# window). A class whose live count rose by more than the sample's
# threshold (1,000 objects) over its highest count so far has an
# "increase"; with 10 increases the guide reports it as a leak
# ("sample.increases >= 10") and reads sampler.statistics (= analyze) for
# its top allocation paths, which the sampler should record from then on
# (in 1.6.3 it does not: with track_all every class is already tracked, so
# sample! never starts the call tree, and the path stays nil).
# A verdict is [class, top path's innermost frames if any] for each class
# with 10 increases.
require "json"
require "memory/profiler"

module LeakPeer
  INCREASES = 10
  @sampler = Memory::Profiler::Sampler.new(depth: 10, increases_threshold: INCREASES)
  @sampler.start

  def self.fathom? = false

  def self.after_window(k)
    verdicts = []
    @sampler.sample! do |sample, _increased|
      next if sample.increases < INCREASES

      stats = @sampler.analyze(sample.target)
      roots = stats && stats[:allocation_roots]
      top = roots && roots[:top_paths].first
      verdicts << { "kind" => "leak", "class" => sample.target.name || sample.target.inspect,
                    "objects" => sample.current_size, "increases" => sample.increases,
                    "site" => top && top[:path].reject { |f| f.include?("/memory-profiler-") }.first(2).join(" < "),
                    "site_retained" => top && top[:retained_count],
                    "hotspot" => roots && roots[:hotspots].keys.reject { |f| f.include?("/memory-profiler-") }.first }
    end
    $stderr.puts "LEAKPEER #{JSON.generate("window" => k + 1, "cpu" => Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID),
                                           "verdicts" => verdicts)}"
  end
end
