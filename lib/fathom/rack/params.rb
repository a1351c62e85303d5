# frozen_string_literal: true

require "uri"
require_relative "response"
require_relative "../options"

module Fathom
  module Rack
    # The query string of a profile request, checked: a bad value is a 400
    # naming the parameter, never an exception from deep inside.
    #
    #   seconds=N    how long gc / profile record (1.., capped at max_seconds)
    #   debug=1      the text report instead of the profile (as Go's ?debug=1)
    #   format=pprof|firefox
    #   gc=1         heap/allocs: run a full GC first (as Go's ?gc=1)
    #   force=1      retention: snapshot even above retention_max_objects;
    #                dump: dump even above dump_max_objects
    #   mode=cpu|wall  profile: what the CPU profiler samples
    #   interval=1ms   ?fathom=cpu (middleware) and profile: mean sampling interval
    class Params
      MAX_QUERY = 2048
      FLAGS = { "1" => true, "true" => true, "0" => false, "false" => false, "" => false }.freeze

      attr_reader :capped

      def initialize(query, config)
        @config = config
        raise Refusal.new(400, "query string too long") if query.to_s.bytesize > MAX_QUERY

        @values = URI.decode_www_form(query.to_s.b.force_encoding(Encoding::UTF_8).scrub).to_h
        @capped = false
      rescue ArgumentError
        raise Refusal.new(400, "malformed query string")
      end

      def [](name)
        @values[name]
      end

      # The duration asked for, within 1..max_seconds (capped, not refused:
      # `go tool pprof -seconds 100000` should still get a profile).
      def seconds
        text = @values["seconds"]
        return @config.default_seconds if text.nil? || text.empty?
        raise Refusal.new(400, "seconds must be a positive integer") unless text.match?(/\A\d+\z/)

        # Any number of digits (the query is at most MAX_QUERY bytes): big
        # values are capped like the others, never refused.
        digits = text.sub(/\A0+/, "")
        raise Refusal.new(400, "seconds must be a positive integer") if digits.empty?

        asked = digits.size > 12 ? Float::INFINITY : digits.to_i
        @capped = asked > @config.max_seconds
        [asked, @config.max_seconds].min
      end

      def flag(name)
        text = @values[name]
        return false if text.nil?

        FLAGS.fetch(text.downcase) { raise Refusal.new(400, "#{name} must be 1 or 0") }
      end

      def debug?
        flag("debug")
      end

      def format(allowed)
        text = @values["format"]
        return :pprof if text.nil? || text.empty? || text == "pprof"
        return text.to_sym if allowed.include?(text.to_sym)

        raise Refusal.new(400, "format must be one of #{allowed.join(", ")} here")
      end

      # ?interval= (a duration: "1ms", "500us"), checked as the profilers
      # check it; `default` when absent.
      def interval(default)
        text = @values["interval"]
        return default if text.nil? || text.empty?

        Options.sampling_interval_ns("interval", text)
        text
      rescue ArgumentError => e
        raise Refusal.new(400, e.message.delete_prefix("fathom: "))
      end

      def one_of(name, allowed, default)
        text = @values[name]
        return default if text.nil? || text.empty?
        return text.to_sym if allowed.map(&:to_s).include?(text)

        raise Refusal.new(400, "#{name} must be one of #{allowed.join(", ")}")
      end
    end
  end
end
