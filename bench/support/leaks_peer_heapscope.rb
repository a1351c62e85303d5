# frozen_string_literal: true

# bench/leaks_peers.rb's adapter for heapscope, used as its README's
# "multi-cycle retention" check, HeapScope.retention_test(cycles:,
# force_gc: true, mode: :lightweight) { work }, with a window as a cycle:
# that method is a RetentionSession sampled once before the first cycle and
# after each (a GC.start, then a per-class count of ObjectSpace.each_object),
# then finish (the report and its findings). Here the session is sampled
# after each window and finished after each window too, so that the bench
# sees what retention_test would have said had it stopped there.
#
# A verdict is a finding a user would read as a leak: HS001
# persistent_class_growth or HS004 unbounded_collection at medium or high
# severity (an HS001 at low severity is heapscope's "likely cache
# plateau"), naming a class; HS010 native_memory_mismatch, at medium or
# high severity too, names no class (growth outside Ruby objects). HS007 (poor GC recovery, no subject) only
# repeats HS001 and HS009 is churn: neither is counted.
require "json"
require "heapscope"

module LeakPeer
  LEAK_CODES = %w[HS001 HS004].freeze
  @session = HeapScope::RetentionSession.new(force_gc: true, mode: :lightweight)
  @session.sample(label: "baseline")

  def self.fathom? = false

  def self.after_window(k)
    @session.sample(label: "cycle_#{k + 1}")
    report = @session.finish
    verdicts = report.findings.filter_map do |f|
      if LEAK_CODES.include?(f.code) && %i[medium high].include?(f.severity)
        { "kind" => "leak", "class" => f.subject, "code" => f.code, "severity" => f.severity.to_s }
      elsif f.code == "HS010" && %i[medium high].include?(f.severity)
        { "kind" => "native", "code" => f.code, "severity" => f.severity.to_s }
      end
    end
    holders = Array(report.globals).select { |g| g.is_a?(Hash) && g[:size_hint].is_a?(Integer) }
                                   .max_by(2) { |g| g[:size_hint] }.map { |g| "#{g[:name]}[#{g[:size_hint]}]" }
    $stderr.puts "LEAKPEER #{JSON.generate("window" => k + 1, "cpu" => Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID),
                                           "verdicts" => verdicts, "globals" => holders)}"
  end
end
