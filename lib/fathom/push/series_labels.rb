# frozen_string_literal: true

require_relative "../version"

module Fathom
  module Push
    # The labels of the series a profile is pushed as (docs/internals/push.md,
    # "Labels"). Pyroscope stores a pushed profile by its labels: `__name__`
    # decides which profile type a sample type lands in
    # (__profile_type__ = name:sample_type:unit:period_type:period_unit), so
    # each mode gets a name that the server files in the right place.
    module SeriesLabels
      # cpu: process_cpu, what every Pyroscope SDK (the pyroscope gem
      #   included) sends for on-CPU samples.
      # wall: wall. The server's default relabeling renames the `cpu` sample
      #   type of a `wall` profile to process_cpu (pkg/validation/relabeling.go,
      #   rule "wall/cpu"); Fathom's wall profile has one, the threads' real
      #   CPU time, so it shows as process_cpu:cpu:nanoseconds:wall:nanoseconds,
      #   a profile type of its own (its period type is wall), never summed
      #   with the cpu mode's process_cpu:cpu:nanoseconds:cpu:nanoseconds.
      # heap: memory, the name the server gives Go's and every SDK's heap
      #   profiles (alloc_*/inuse_* sample types).
      # gc, retention: names of Fathom's own. /ingest and `profilecli upload`
      #   guess the name from the sample types (pkg/og/convert/pprof:
      #   anything with a type containing "cpu" is process_cpu, with "inuse_"
      #   memory): the GC profile (types wall, cpu, gc_steps, gcs) would be
      #   filed with CPU profiles, the retention profile (inuse_*) with heap
      #   profiles. The Push API takes the name as given.
      NAMES = { cpu: "process_cpu", wall: "wall", heap: "memory", gc: "fathom_gc", retention: "fathom_retention" }.freeze
      MODES = NAMES.keys.freeze

      # Prometheus' legacy label names, which every backend accepts as they are
      # (Pyroscope rewrites dots to underscores, Parca refuses them).
      NAME = /\A[a-zA-Z_][a-zA-Z0-9_]*\z/.freeze
      # Set by Fathom from other settings; a user label of these names would
      # make a duplicate, which the server refuses (the whole request). `__`
      # names are the server's own (__name__, __delta__, __profile_type__...).
      RESERVED = %w[service_name pid].freeze
      # Pyroscope's defaults: at most 30 label names per series (Fathom sets
      # 10), names of 1024 bytes, values of 2048.
      MAX_USER_LABELS = 16
      MAX_NAME_BYTES = 1024
      MAX_VALUE_BYTES = 2048

      module_function

      # The user's labels checked: a Hash of String/Symbol names to values
      # (to_s). `name` names the setting in messages. Returns a frozen
      # {String => String}.
      def check_user_labels(name, labels)
        raise TypeError, "fathom: #{name} must be a Hash of label names to values, got #{labels.class}" unless Hash === labels
        raise ArgumentError, "fathom: #{name} has #{labels.size} labels, at most #{MAX_USER_LABELS}" if labels.size > MAX_USER_LABELS

        labels.each_with_object({}) do |(key, value), out|
          key = check_label_name(name, key)
          out[key] = check_label_value(name, key, value)
        end.freeze
      end

      def check_label_name(setting, key)
        raise TypeError, "fathom: #{setting}'s label names must be Strings or Symbols, got #{key.class}" unless String === key || Symbol === key

        key = key.to_s
        unless key.match?(NAME) && key.bytesize <= MAX_NAME_BYTES
          raise ArgumentError, "fathom: #{setting}: label name #{key.inspect} must match [a-zA-Z_][a-zA-Z0-9_]* " \
                               "(at most #{MAX_NAME_BYTES} bytes)"
        end
        if key.start_with?("__") || RESERVED.include?(key)
          raise ArgumentError, "fathom: #{setting}: label name #{key.inspect} is set by Fathom or the server " \
                               "(service_name comes from FATHOM_SERVICE / service:)"
        end
        key
      end

      def check_label_value(setting, key, value)
        text = String === value ? value : value.to_s
        text = text.dup.force_encoding(Encoding::UTF_8)
        if text.empty? || !text.valid_encoding? || text.bytesize > MAX_VALUE_BYTES || text.match?(/[[:cntrl:]]/)
          raise ArgumentError, "fathom: #{setting}: the value of label #{key.inspect} must be non-empty UTF-8 text " \
                               "without control characters, at most #{MAX_VALUE_BYTES} bytes"
        end
        text.freeze
      end

      # FATHOM_LABELS: "k=v,k2=v2" (no commas in values; spaces around items
      # are trimmed).
      def parse(name, text)
        pairs = text.split(",").map(&:strip).reject(&:empty?).map do |item|
          key, value = item.split("=", 2)
          raise ArgumentError, "fathom: #{name} must be k=v,k2=v2; #{Options.clean(item).inspect} has no =" unless value

          [key.strip, value.strip]
        end
        keys = pairs.map(&:first)
        dup = keys.find { |k| keys.count(k) > 1 }
        raise ArgumentError, "fathom: #{name} gives label #{dup.inspect} twice" if dup

        check_user_labels(name, pairs.to_h)
      end

      # The labels of one series, as [name, value] pairs. `process` holds
      # what is read in the sending thread, at send time (so a forked child
      # sends its own pid): :hostname, :pid.
      #
      # __delta__="false" on every series: all of Fathom's values are per
      # window (CPU, wall and GC time in the window, objects allocated in
      # it; in-use and retained values are a snapshot at its end). Without
      # it the server subtracts the previous profile from `memory` profiles'
      # alloc_objects/alloc_space, taking them for Go's cumulative counters
      # (pkg/phlaredb/delta.go, isDeltaSupported), and Fathom's allocations
      # would come out as differences between windows. The server drops the
      # label before storing; on names it never deltas it does nothing.
      #
      # process.runtime.*, otel.scope.*: the names the pyroscope gem sends
      # (pyroscope-rs), so that queries written for it find Fathom's series
      # too; ruby_version is the short form the issue asked for.
      def pyroscope(mode:, service:, user_labels:, process:)
        labels = [["__name__", NAMES.fetch(mode)], ["__delta__", "false"], ["service_name", service],
                  ["hostname", process.fetch(:hostname)], ["pid", process.fetch(:pid).to_s],
                  ["ruby_version", RUBY_VERSION], ["process.runtime.name", RUBY_ENGINE],
                  ["process.runtime.version", RUBY_ENGINE_VERSION], ["otel.scope.name", "fathom"],
                  ["otel.scope.version", Fathom::VERSION]]
        merge_user(labels, user_labels)
      end

      # Parca: the same names minus what it has no use for. Parca computes no
      # deltas on the server (so no __delta__) and refuses label names that
      # are not Prometheus' legacy ones (so no dotted names: ruby_version
      # carries the version).
      def parca(mode:, service:, user_labels:, process:)
        pyroscope(mode: mode, service: service, user_labels: user_labels, process: process)
          .reject { |name, _| name == "__delta__" || name.include?(".") }
      end

      # A user label replaces Fathom's of the same name (hostname,
      # ruby_version: a container's hostname is often a pod's random name).
      def merge_user(labels, user_labels)
        labels.reject { |name, _| user_labels.key?(name) } + user_labels.to_a
      end
    end
  end
end
