# frozen_string_literal: true

module Fathom
  module Context
    # The active span's id, as an Integer, from whichever tracer is loaded:
    # Datadog (`Datadog::Tracing.active_span.id`, already a 64-bit Integer)
    # or OpenTelemetry (`OpenTelemetry::Trace.current_span.context.span_id`,
    # 8 bytes, big-endian: the Integer whose hex is the span's hex id).
    # nil when neither is loaded, no span is active, or the tracer fails:
    # a profiler never breaks a request over a span id. Neither tracer is a
    # dependency; both are looked up by name on each call (two `defined?`
    # checks when neither is loaded).
    module Tracing
      MAX = 2**64 - 1

      module_function

      def active_span_id
        datadog_span_id || otel_span_id
      rescue StandardError
        nil
      end

      def datadog_span_id
        return unless defined?(::Datadog::Tracing) && ::Datadog::Tracing.respond_to?(:active_span)

        id = ::Datadog::Tracing.active_span&.id
        id if id.is_a?(Integer) && id.between?(1, MAX)
      end

      def otel_span_id
        return unless defined?(::OpenTelemetry::Trace) && ::OpenTelemetry::Trace.respond_to?(:current_span)

        context = ::OpenTelemetry::Trace.current_span.context
        return unless context.valid?

        bytes = context.span_id
        return unless bytes.is_a?(String) && bytes.bytesize == 8

        id = bytes.unpack1("Q>")
        id unless id.zero?
      end
    end
  end
end
