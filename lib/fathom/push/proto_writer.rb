# frozen_string_literal: true

module Fathom
  module Push
    # The protobuf encoding of the few messages a push sends, written by hand
    # (no protobuf gem: Fathom adds no runtime dependency). Only two wire
    # types are needed: every field of these messages is a string, bytes or
    # a nested message, all length-delimited (wire type 2), whose length is
    # a varint. Field numbers are those of grafana/pyroscope's
    # api/push/v1/push.proto and api/types/v1/types.proto (copied into
    # test/fixtures/pyroscope/, which the tests decode with protoc):
    #
    #   push.v1.PushRequest      { repeated RawProfileSeries series = 1; }
    #   push.v1.RawProfileSeries { repeated types.v1.LabelPair labels = 1;
    #                              repeated RawSample samples = 2; }
    #   push.v1.RawSample        { bytes raw_profile = 1; string ID = 2; }
    #   types.v1.LabelPair       { string name = 1; string value = 2; }
    #
    # (RawProfileSeries' annotations = 3 is left out: the server drops the
    # ones a client sends.)
    module ProtoWriter
      LENGTH_DELIMITED = 2

      module_function

      # One PushRequest holding `series`: [[labels, raw_profile, id], ...],
      # labels a list of [name, value] pairs.
      def push_request(series)
        out = binary
        series.each do |labels, raw_profile, id|
          body = binary
          labels.each { |name, value| field(body, 1, field(field(binary, 1, name), 2, value)) }
          field(body, 2, field(field(binary, 1, raw_profile), 2, id))
          field(out, 1, body)
        end
        out
      end

      # Appends field `number` (length-delimited) with `bytes` to `out`.
      def field(out, number, bytes)
        varint(out, (number << 3) | LENGTH_DELIMITED)
        varint(out, bytes.bytesize)
        out << bytes.b
      end

      # Base-128, least significant group first; values here are never
      # negative (tags and lengths).
      def varint(out, value)
        raise ArgumentError, "fathom: varint of a negative value" if value.negative?

        loop do
          byte = value & 0x7f
          value >>= 7
          out << (value.zero? ? byte : (byte | 0x80)).chr
          return out if value.zero?
        end
      end

      def binary
        String.new(encoding: Encoding::BINARY)
      end
    end
  end
end
