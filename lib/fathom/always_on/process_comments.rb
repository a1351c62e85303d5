# frozen_string_literal: true

require_relative "../profile"
require_relative "../pprof/edit"

module Fathom
  # Who wrote a profile, for files that leave the machine (always-on
  # directories shipped to Pyroscope/Parca, profiles fetched over HTTP):
  # pid, hostname, Ruby version and the time window, added to a pprof
  # profile as comments (`go tool pprof -comments` lists them):
  #
  #   pid=4242
  #   hostname=web-1
  #   ruby=3.1.2 (x86_64-linux-gnu)
  #   window=2026-11-26T15:00:00.000Z/2026-11-26T15:00:02.000Z
  #
  # The window is the profile's own time_nanos + duration_nanos (ISO 8601
  # interval, UTC); a Firefox profile (JSON, with its own meta) is returned
  # unchanged.
  module ProcessComments
    module_function

    def lines(bytes)
      start_ns, duration_ns = Pprof::Edit.time_window(bytes)
      out = who
      out << "window=#{iso(start_ns)}/#{iso(start_ns + duration_ns)}" if start_ns.positive?
      out
    end

    # pid, hostname and Ruby: which process (which puma worker) wrote it.
    def who
      ["pid=#{Process.pid}", "hostname=#{hostname}", "ruby=#{RUBY_VERSION} (#{RUBY_PLATFORM})"]
    end

    # The same lines for a text reply (the endpoints' ?debug=1), which has
    # no comments to carry them: a pprof profile's own lines (with its
    # window); for a Firefox profile, whose window is in its JSON, the time
    # of the reply instead.
    def text_lines(profile)
      return lines(profile.bytes) if profile.format == :pprof

      who << "time=#{iso(Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond))}"
    end

    # A new Profile with the comments added (and `default_sample_type`
    # switched when given); the stats, kind and format are kept.
    def annotate(profile, default_sample_type: nil)
      return profile unless profile.format == :pprof

      bytes = Pprof::Edit.apply(profile.bytes, comments: lines(profile.bytes), default_sample_type: default_sample_type)
      Profile.new(bytes, profile.stats.merge(bytes: bytes.bytesize), kind: profile.kind, format: :pprof)
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
