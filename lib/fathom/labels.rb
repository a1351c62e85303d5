# frozen_string_literal: true

require_relative "native"

module Fathom
  # Request labels: key/value pairs (an endpoint, a job class) that CPU,
  # wall and heap samples taken on this thread carry as pprof string labels,
  # so `go tool pprof -tagfocus endpoint=...` and Pyroscope can slice a
  # profile by them.
  #
  #   Fathom::Labels.with(endpoint: "UsersController#show") { handle }
  #   Fathom::Labels.current            # => {"endpoint" => "UsersController#show"} inside
  #   token = Fathom::Labels.set(endpoint: "jobs")  # replace; nil or {} clears
  #   Fathom::Labels.restore(token)
  #   Fathom::Labels.span_id = span.id  # CPU/wall samples carry span_id (16 hex digits)
  #
  # Labels belong to the calling thread (its native thread: fibers of one
  # thread share them; docs/internals/labels.md). Keys are label names as
  # Prometheus and Pyroscope spell them, /\A[a-zA-Z_][a-zA-Z0-9_]*\z/, not
  # one Fathom writes itself (RESERVED, or anything starting "__"); values
  # are non-empty Strings (or Symbols) of at most 256 bytes, scrubbed to
  # valid UTF-8; at most 8 labels at once.
  #
  # Each distinct set of labels is interned once per process, and there are
  # at most Native::Labels.stats[:max_sets] (1024) of them: past that, a new
  # set is recorded with every value "(other)" (and counted in
  # Labels.stats[:overflowed]), so a value built from a raw path with ids
  # cannot grow memory or a backend's series count without bound.
  module Labels
    NAME = /\A[a-zA-Z_][a-zA-Z0-9_]*\z/.freeze
    # Labels Fathom's profiles or a push already carry (CPU: thread id,
    # thread name, state, gvl, span_id; heap: class, thread; the series
    # labels a backend keys on; the overflow marker).
    RESERVED = %w[thread state gvl span_id class fathom_labels service_name hostname pid].freeze
    MAX_LABELS = 8
    MAX_VALUE_BYTES = 256
    EMPTY = {}.freeze
    THREAD_KEY = :__fathom_labels
    private_constant :THREAD_KEY

    # What set returns and restore takes: the labels to go back to. Opaque.
    class Token
      def initialize(labels, set_id)
        @labels = labels
        @set_id = set_id
        freeze
      end

      # :nodoc:
      def __state = [@labels, @set_id]

      def inspect = "#<Fathom::Labels::Token>"
    end

    class << self
      # The calling thread's labels: a frozen Hash of Strings ({} if none).
      def current
        Thread.current.thread_variable_get(THREAD_KEY) || EMPTY
      end

      # Replaces the calling thread's labels with `labels` (a Hash; nil or
      # {} clears them). Returns a Token for restore.
      def set(labels)
        labels = EMPTY if labels.nil?
        raise TypeError, "fathom: labels must be a Hash, not #{labels.class}" unless labels.is_a?(Hash)

        apply(normalize(labels))
      end

      # Puts back the labels a Token was taken with (Labels.set's).
      def restore(token)
        raise TypeError, "fathom: Labels.restore takes the token Labels.set returned, not #{token.class}" unless token.is_a?(Token)

        labels, set_id = token.__state
        native&.current_set = set_id
        Thread.current.thread_variable_set(THREAD_KEY, labels.empty? ? nil : labels)
        nil
      end

      # Runs the block with `labels` merged onto the current ones (a nil
      # value removes that key), restoring them afterwards, also when it
      # raises or throws. Returns the block's value.
      def with(labels = nil, **keywords)
        raise ArgumentError, "fathom: Labels.with needs a block" unless block_given?
        raise TypeError, "fathom: labels must be a Hash, not #{labels.class}" unless labels.nil? || labels.is_a?(Hash)

        given = labels ? labels.merge(keywords) : keywords
        # Only the given labels are checked: the current ones already were.
        merged = current.dup
        given.each do |key, value|
          name = key_name(key)
          if value.nil?
            merged.delete(name)
          else
            merged[name] = label_value(name, value)
          end
        end
        raise ArgumentError, "fathom: at most #{MAX_LABELS} labels at once, got #{merged.size}" if merged.size > MAX_LABELS

        token = apply(merged.empty? ? EMPTY : merged.freeze)
        begin
          yield
        ensure
          restore(token)
        end
      end

      # The calling thread's span id (Integer) or nil.
      def span_id
        native&.span_id
      end

      # Integer 1..2**64-1 or nil: CPU/wall samples taken on this thread
      # carry it as the label span_id (16 lowercase hex digits, as Pyroscope
      # links spans to profiles). Heap samples do not.
      def span_id=(id)
        unless id.nil? || id.is_a?(Integer)
          raise TypeError, "fathom: Labels.span_id must be an Integer or nil, not #{id.class}"
        end
        raise ArgumentError, "fathom: Labels.span_id must be in 1..2**64-1, got #{id}" if id && !(1..(2**64 - 1)).cover?(id)

        native&.span_id = id
        id
      end

      # {sets:, max_sets:, overflowed:}: distinct label sets interned, the
      # bound, and how many sets were recorded as "(other)" past it.
      def stats
        native&.stats || { sets: 0, max_sets: 0, overflowed: 0 }
      end

      private

      # Without the extension (not built, another platform) labels are kept
      # on the Ruby side only: an integration calling with() must not break
      # the app, and there is no sampler to read them anyway.
      def native
        return @native if defined?(@native)

        @native = NativeLoader.available? ? Native::Labels : nil
      end

      def apply(labels)
        labels_native = native
        token = Token.new(current, labels_native ? labels_native.current_set : 0)
        labels_native.current_set = labels.empty? ? 0 : labels_native.intern(labels.to_a) if labels_native
        Thread.current.thread_variable_set(THREAD_KEY, labels.empty? ? nil : labels)
        token
      end

      # Names already checked, by the Symbol or frozen String given: an
      # integration passes the same few keys on every request. Bounded (keys
      # come from code, but a caller could build them).
      KEY_NAMES = {} # rubocop:disable Style/MutableConstant
      private_constant :KEY_NAMES

      def key_name(key)
        cached = KEY_NAMES[key]
        return cached if cached

        name = checked_key_name(key)
        KEY_NAMES[key] = name if KEY_NAMES.size < 256 && (key.is_a?(Symbol) || key.frozen?)
        name
      end

      def checked_key_name(key)
        name = case key
               when Symbol then key.name
               when String then key
               else raise TypeError, "fathom: a label name must be a Symbol or String, not #{key.class}"
               end
        unless NAME.match?(name)
          raise ArgumentError, "fathom: label name #{name.inspect} must match #{NAME.inspect} (a Prometheus/Pyroscope label name)"
        end
        if RESERVED.include?(name) || name.start_with?("__")
          raise ArgumentError, "fathom: label name #{name.inspect} is reserved (Fathom writes it itself)"
        end

        name.frozen? ? name : name.dup.freeze
      end

      # A frozen Hash String => String, validated.
      def normalize(labels)
        return EMPTY if labels.empty?
        raise ArgumentError, "fathom: at most #{MAX_LABELS} labels at once, got #{labels.size}" if labels.size > MAX_LABELS

        out = {}
        labels.each do |key, value|
          name = key_name(key)
          out[name] = label_value(name, value)
        end
        out.freeze
      end

      def label_value(name, value)
        value = value.name if value.is_a?(Symbol)
        raise TypeError, "fathom: label #{name} must be a String, not #{value.class}" unless value.is_a?(String)

        utf8 = value.encoding == Encoding::UTF_8
        value = if utf8 && value.valid_encoding?
                  value # the common case: no copy unless it is not frozen (below)
                elsif utf8 || value.encoding == Encoding::BINARY
                  value.dup.force_encoding(Encoding::UTF_8).scrub
                else
                  value.encode(Encoding::UTF_8, invalid: :replace, undef: :replace)
                end
        raise ArgumentError, "fathom: label #{name} must not be empty" if value.empty?
        if value.bytesize > MAX_VALUE_BYTES
          raise ArgumentError, "fathom: label #{name} is #{value.bytesize} bytes, at most #{MAX_VALUE_BYTES}"
        end

        value.frozen? ? value : value.dup.freeze
      end
    end
  end

  # Fathom::Labels.with.
  def self.with_labels(labels = nil, **keywords, &block)
    Labels.with(labels, **keywords, &block)
  end
end
