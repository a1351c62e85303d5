# frozen_string_literal: true

require_relative "../files/output_paths"

module Fathom
  module Rack
    # Raised inside the endpoints to answer with an error status. Its message
    # is written for the client and is all the client gets: error bodies
    # never carry a backtrace, the environment, or an exception's own
    # message (which may hold paths); unexpected errors become a fixed 500.
    class Refusal < StandardError
      attr_reader :status, :headers

      def initialize(status, message, headers = {})
        super(message)
        @status = status
        @headers = headers
      end
    end

    # Rack triples ([status, headers, body]); header names are lower case
    # (required by Rack 3, accepted by Rack 2).
    module Response
      NO_STORE = { "cache-control" => "no-store", "x-content-type-options" => "nosniff" }.freeze

      module_function

      def error(status, message, headers = {})
        text("fathom: #{message}\n", status: status, headers: headers)
      end

      def text(body, status: 200, headers: {})
        [status, NO_STORE.merge("content-type" => "text/plain; charset=utf-8",
                                "content-length" => body.bytesize.to_s).merge(headers), [body]]
      end

      # A profile as a download: pprof (gzipped protobuf, what `go tool
      # pprof` fetches) or Firefox Profiler JSON (gzipped).
      def profile(profile, name, headers = {})
        ext = OutputPaths.format_extension(profile.format)
        body = profile.bytes
        [200, NO_STORE.merge("content-type" => "application/octet-stream",
                             "content-disposition" => %(attachment; filename="#{name}#{ext}"),
                             "content-length" => body.bytesize.to_s).merge(headers), [body]]
      end
    end
  end
end
