# frozen_string_literal: true

require_relative "proto_writer"

module Fathom
  module Push
    # The body of one push, per backend.
    module RequestBody
      module_function

      # [body, content_type] for one profile (a Client::Item) and its labels.
      #
      # Pyroscope: a protobuf PushRequest holding one series with one sample,
      # sent unary over the Connect protocol (Content-Type application/proto).
      # raw_profile is Fathom's gzipped pprof as it is: the server opens
      # gzipped and plain profiles alike (pkg/pprof RawFromBytes), so the
      # body is not compressed again (the pyroscope gem gzips the whole body
      # because its raw_profile is plain).
      #
      # Parca: WriteRaw through the grpc-gateway that Parca's HTTP server
      # mounts at /api (HTTP/1.1 and JSON; gRPC itself needs HTTP/2, which
      # Net::HTTP does not speak). JSON is protobuf's JSON mapping: bytes in
      # base64, field names in lowerCamelCase. normalized: true, because the
      # addresses in Fathom's profiles are not to be adjusted for
      # position-independent code (Ruby frames have none; native frames come
      # already symbolized).
      def encode(backend, item, labels)
        case backend
        when :pyroscope
          [ProtoWriter.push_request([[labels, item.bytes, item.id]]), "application/proto"]
        when :parca
          require "json" # at send time, after the application's Bundler (lib/fathom/files/stdlib.rb)
          series = { labels: { labels: labels.map { |name, value| { name: name, value: value } } },
                     samples: [{ rawProfile: [item.bytes].pack("m0") }] }
          [JSON.generate({ series: [series], normalized: true }), "application/json"]
        else
          raise ArgumentError, "fathom: unknown backend #{backend.inspect}"
        end
      end
    end
  end
end
