# frozen_string_literal: true

module Fathom
  # STAND-IN for the native labels API (branch `labels`, issue 27), so that
  # the request and job integrations (Fathom::Rack::RequestLabels,
  # lib/fathom/context/) run and are tested before it is merged. Same
  # interface, thread-local storage only, and nothing reaches a sample.
  # The lead replaces this file with the native one at merge.
  module Labels
    KEY = :__fathom_labels_standin
    SPAN_KEY = :__fathom_span_id_standin
    EMPTY = {}.freeze
    MAX_SPAN_ID = 2**64 - 1

    class << self
      # This thread's labels: a frozen Hash{String => String}.
      def current
        Thread.current.thread_variable_get(KEY) || EMPTY
      end

      # Merges `labels` onto this thread's for the block; restores the
      # previous set after it, also when it raises.
      def with(labels)
        token = set(current.merge(normalize(labels)))
        begin
          yield
        ensure
          restore(token)
        end
      end

      # Replaces this thread's labels with `labels`; returns a token that
      # restore brings the previous set back with.
      def set(labels)
        previous = current
        Thread.current.thread_variable_set(KEY, normalize(labels).freeze)
        previous
      end

      def restore(token)
        raise ArgumentError, "fathom: Labels.restore takes a token from Labels.set" unless token.is_a?(Hash)

        Thread.current.thread_variable_set(KEY, token)
        nil
      end

      def span_id
        Thread.current.thread_variable_get(SPAN_KEY)
      end

      def span_id=(id)
        unless id.nil? || (id.is_a?(Integer) && id.between?(1, MAX_SPAN_ID))
          raise ArgumentError, "fathom: span_id must be nil or an Integer in 1..2**64-1, got #{id.inspect}"
        end

        Thread.current.thread_variable_set(SPAN_KEY, id)
      end

      private

      def normalize(labels)
        raise ArgumentError, "fathom: labels must be a Hash, got #{labels.class}" unless labels.is_a?(Hash)

        labels.each_with_object({}) do |(k, v), out|
          unless (k.is_a?(String) || k.is_a?(Symbol)) && (v.is_a?(String) || v.is_a?(Symbol))
            raise ArgumentError, "fathom: label #{k.inspect} => #{v.inspect}: names and values must be Strings or Symbols"
          end

          out[k.to_s.freeze] = v.to_s.freeze
        end
      end
    end
  end
end
