# frozen_string_literal: true

require_relative "../options"
require_relative "../env_text"
require_relative "../error"
require_relative "../files/rotation"

module Fathom
  module Rack
    # What the endpoints and the middleware may do, checked once when the app
    # is built (bad values raise TypeError/ArgumentError naming the option).
    #
    #   enabled:     nothing is served unless true (default: FATHOM_RACK=1 in
    #                the environment): mounting the app alone exposes nothing.
    #   prefix:      where the endpoints live ("/debug/fathom").
    #   token:       a bearer token. Without one only loopback clients are
    #                served; with one every request must send
    #                `Authorization: Bearer <token>` (default: FATHOM_RACK_TOKEN).
    #   hosts:       without a token, the Host names served besides
    #                localhost, 127.0.0.1 and [::1] (any port): an Array of
    #                names, or a comma-separated String (default:
    #                FATHOM_RACK_HOSTS). See Guard (DNS rebinding).
    #   max_seconds: the cap on ?seconds= (60); longer requests are capped
    #                and say so (X-Fathom-Seconds-Capped).
    #   default_seconds: ?seconds= when absent (30, as Go).
    #   retention_max_objects: a retention snapshot pauses the app for fork()
    #                only, but its child needs ~110 MB and ~1 s of CPU per
    #                million objects (plus the parent's copy-on-write growth);
    #                above this many live objects it is refused (413) unless
    #                the request says ?force=1 (2_000_000).
    #   dump_max_objects: /dump pauses the app for fork() only, but its reply
    #                grows with the heap (~25-30 bytes gzipped per object);
    #                above this many live objects it is refused (413) unless
    #                the request says ?force=1 (5_000_000).
    #   heap:, gc:   the running profilers the heap/allocs endpoints read
    #                (default: those started by fathom/setup, if any). A
    #                Proc is called at each request.
    #   always_on:   the Fathom::AlwaysOn whose windows the gc and profile
    #                endpoints and ?fathom= take (default: fathom/setup's);
    #                a Proc is called at each request.
    #   dir:         middleware only: write per-request profiles there and
    #                serve the page as usual; without it the profile is
    #                returned instead of the page.
    #   keep_files:, keep_mb:  middleware with dir: at most this many of
    #                Fathom's files / MB in dir, the oldest removed first
    #                (default: FATHOM_KEEP / FATHOM_KEEP_MB, else 50 / 100,
    #                as always-on, which may share the directory).
    class Config
      DEFAULT_PREFIX = "/debug/fathom"
      SECONDS_RANGE = (1..3600).freeze
      OBJECTS_RANGE = (1..(1 << 31)).freeze

      attr_reader :prefix, :token, :hosts, :max_seconds, :default_seconds, :retention_max_objects, :dump_max_objects, :dir,
                  :keep_files, :keep_mb

      def initialize(enabled: ENV["FATHOM_RACK"] == "1", prefix: DEFAULT_PREFIX, token: EnvText.fetch(ENV, "FATHOM_RACK_TOKEN"),
                     hosts: EnvText.fetch(ENV, "FATHOM_RACK_HOSTS"),
                     max_seconds: 60, default_seconds: 30, retention_max_objects: 2_000_000, dump_max_objects: 5_000_000,
                     heap: nil, gc: nil, always_on: nil, dir: nil, keep_files: self.class.env_integer("FATHOM_KEEP", 50),
                     keep_mb: self.class.env_integer("FATHOM_KEEP_MB", 100))
        @enabled = Options.boolean("enabled", enabled)
        @prefix = check_prefix(prefix)
        @token = check_token(token)
        @hosts = check_hosts(hosts)
        @max_seconds = Options.integer("max_seconds", max_seconds, SECONDS_RANGE)
        @default_seconds = [Options.integer("default_seconds", default_seconds, SECONDS_RANGE), @max_seconds].min
        @retention_max_objects = Options.integer("retention_max_objects", retention_max_objects, OBJECTS_RANGE)
        @dump_max_objects = Options.integer("dump_max_objects", dump_max_objects, OBJECTS_RANGE)
        @heap = heap
        @gc = gc
        @always_on = always_on
        @dir = NilClass === dir ? nil : File.expand_path(Options.path("dir", dir))
        @keep_files = Options.integer("keep_files", keep_files, Files::Rotation::FILES_RANGE)
        @keep_mb = Options.integer("keep_mb", keep_mb, Files::Rotation::MB_RANGE)
      end

      def enabled?
        @enabled
      end

      # The running heap profiler to read, or nil.
      def heap_profiler
        running(@heap, :heap)
      end

      def gc_profiler
        running(@gc, :gc)
      end

      # The always-on profiling (fathom/setup, the Railtie) when it runs
      # `mode`: endpoints and per-request profiles then take a window of it
      # (AlwaysOn#window) instead of refusing. nil otherwise.
      def always_on(mode)
        always_on = Proc === @always_on ? @always_on.call : @always_on
        always_on ||= Fathom::AlwaysOn::Setup.always_on if defined?(Fathom::AlwaysOn::Setup)
        always_on if always_on.respond_to?(:running?) && always_on.running?(mode)
      end

      # Never shows the token (inspect ends up in logs and error pages).
      def inspect
        "#<#{self.class} enabled=#{@enabled} prefix=#{@prefix.inspect} token=#{@token ? "[set]" : "none"} hosts=#{@hosts.inspect} " \
          "max_seconds=#{@max_seconds} retention_max_objects=#{@retention_max_objects} " \
          "dump_max_objects=#{@dump_max_objects}>"
      end

      # FATHOM_KEEP / FATHOM_KEEP_MB as always-on reads them, else the default.
      def self.env_integer(name, default)
        value = EnvText.reader(ENV)[name]
        value.nil? ? default : Options.parse_integer(name, value, (1..(1 << 40)))
      end

      private

      def running(given, mode)
        found = Proc === given ? given.call : given
        always_on = Proc === @always_on ? @always_on.call : @always_on
        found ||= always_on.profilers[mode] if always_on.respond_to?(:profilers)
        found ||= Fathom::AlwaysOn::Setup.profilers[mode] if defined?(Fathom::AlwaysOn::Setup)
        found if found.respond_to?(:running?) && found.running?
      end

      def check_prefix(prefix)
        raise TypeError, "fathom: prefix must be a String, got #{Options.describe(prefix)}" unless String === prefix
        unless prefix.valid_encoding? && prefix.start_with?("/") && !prefix.match?(%r{//|\s})
          raise ArgumentError, "fathom: prefix must be a path starting with /, got #{Options.shown(prefix)}"
        end

        prefix == "/" ? "" : prefix.chomp("/")
      end

      HOST_NAME = /\A(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|[0-9a-f:.]+)\z/.freeze

      def check_hosts(hosts)
        list =
          case hosts
          when nil then []
          when String then hosts.b.split(",") # as bytes: HOST_NAME below refuses any that is not ASCII
          when Array then hosts
          else raise TypeError, "fathom: hosts must be an Array of Strings or a comma-separated String, got #{Options.describe(hosts)}"
          end
        list.filter_map do |name|
          raise TypeError, "fathom: hosts must hold Strings, got #{Options.describe(name)}" unless String === name

          name = name.b.strip.downcase.delete_prefix("[").delete_suffix("]")
          next if name.empty?
          raise ArgumentError, "fathom: hosts must hold host names (no port, scheme or path), got #{Options.shown(name)}" unless name.bytesize <= 253 && name.match?(HOST_NAME)

          name.force_encoding(Encoding::UTF_8).freeze # ASCII, as HOST_NAME matched
        end.uniq.freeze
      end

      def check_token(token)
        return nil if NilClass === token || token == ""
        raise TypeError, "fathom: token must be a String, got #{Options.describe(token)}" unless String === token
        # Short tokens can be guessed; the header carries printable ASCII.
        unless token.bytesize >= 16 && token.b.match?(/\A[\x21-\x7e]+\z/n)
          raise ArgumentError, "fathom: token must be at least 16 printable ASCII characters (no spaces)"
        end

        token.b.freeze
      end
    end
  end
end
