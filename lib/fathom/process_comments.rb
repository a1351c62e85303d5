# frozen_string_literal: true

module Fathom
  # Who wrote a profile, for files that leave the machine (always-on
  # directories shipped to Pyroscope/Parca, profiles fetched over HTTP):
  # pid, hostname, Ruby version and the time window, written into a pprof
  # profile as comments (`go tool pprof -comments` lists them):
  #
  #   pid=4242
  #   hostname=web-1
  #   ruby=3.1.2 (x86_64-linux-gnu)
  #   window=2026-11-26T15:00:00.000Z/2026-11-26T15:00:02.000Z
  #
  # The native encoder writes them as it encodes the profile (#stamp is
  # what a profiler's flush passes down; core/encode/output_stamp.h): the
  # first three lines come from here, the window from the profile's own
  # time_nanos + duration_nanos. A Firefox profile (JSON, with its own meta)
  # gets none.
  module ProcessComments
    module_function

    # What HeapProfiler#flush, GcProfiler#flush, CpuProfiler#flush and
    # Retention.snapshot take as `stamp:`: these lines, the window, and the
    # default sample type when given (the allocs endpoint's alloc_space).
    # extra: more comment lines (a heap window's Leaks::Notes: the
    # process's memory, the leak holders found).
    def stamp(default_sample_type: nil, extra: nil)
      [extra ? who.concat(extra) : who, default_sample_type&.to_s].freeze
    end

    # pid, hostname and Ruby: which process (which puma worker) wrote it.
    def who
      ["pid=#{Process.pid}", "hostname=#{hostname}", "ruby=#{RUBY_VERSION} (#{RUBY_PLATFORM})"]
    end

    # The same lines for a text reply (?debug=1), which has no comments to
    # carry them, to print above the profile's report: who, and the
    # profile's window; for a Firefox profile, whose window is in its JSON,
    # the time of the reply instead. None for a stamped pprof profile: its
    # report prints its comments, these among them.
    def text_lines(profile)
      unless profile.format == :pprof
        return who << "time=#{iso(Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond))}"
      end

      decoded = profile.decode
      return [] if decoded.comments.any? { |c| c.start_with?("pid=") }

      lines = who
      start_ns = decoded.time_nanos
      lines << "window=#{iso(start_ns)}/#{iso(start_ns + decoded.duration_nanos)}" if start_ns.positive?
      lines
    end

    def hostname
      require "socket" # here, not at load (lib/fathom/files/stdlib.rb)
      @hostname ||= Socket.gethostname.to_s.scrub.gsub(/[[:cntrl:]\s]/, "_")
    rescue StandardError
      "unknown"
    end

    def iso(ns)
      Time.at(ns / 1_000_000_000, ns % 1_000_000_000, :nsec).utc.strftime("%Y-%m-%dT%H:%M:%S.%LZ")
    end
  end
end
