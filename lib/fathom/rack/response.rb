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

      MN_THREADS = "Ruby's M:N threads are on in this process (RUBY_MN_THREADS): the CPU/wall profiler cannot " \
                   "sample them; heap, GC and retention profiling work"

      # A 409 for a profiler whose #start raised: `busy` (a fixed text), or
      # the M:N refusal, which no wait will cure. Chosen by the error, never
      # carrying its message (the rule above).
      def self.could_not_start(error, busy)
        new(409, error.message.include?("RUBY_MN_THREADS") ? MN_THREADS : busy)
      end
    end

    # Rack triples ([status, headers, body]); header names are lower case
    # (required by Rack 3, accepted by Rack 2). Every one says which
    # process answered (X-Fathom-Pid): behind a preforking server (puma
    # cluster) any worker may, and an error or a Firefox profile has no
    # pid= comment to say it.
    module Response
      NO_STORE = { "cache-control" => "no-store", "x-content-type-options" => "nosniff" }.freeze
      PID = "x-fathom-pid"

      module_function

      # NO_STORE and this process's pid (read at each reply: forked workers).
      def base_headers
        NO_STORE.merge(PID => Process.pid.to_s)
      end

      def error(status, message, headers = {})
        text("fathom: #{message}\n", status: status, headers: headers)
      end

      def text(body, status: 200, headers: {})
        [status, base_headers.merge("content-type" => "text/plain; charset=utf-8",
                                    "content-length" => body.bytesize.to_s).merge(headers), [body]]
      end

      # The index page (Index, whose text is escaped there). A CSP without
      # scripts: the page is links and a table.
      def html(body)
        [200, base_headers.merge("content-type" => "text/html; charset=utf-8",
                                 "content-security-policy" => "default-src 'none'",
                                 "content-length" => body.bytesize.to_s), [body]]
      end

      # A profile as a download: pprof (gzipped protobuf, what `go tool
      # pprof` fetches) or Firefox Profiler JSON (gzipped).
      def profile(profile, name, headers = {})
        ext = Files::OutputPaths.format_extension(profile.format)
        body = profile.bytes
        [200, base_headers.merge("content-type" => "application/octet-stream",
                             "content-disposition" => %(attachment; filename="#{name}#{ext}"),
                             "content-length" => body.bytesize.to_s).merge(headers), [body]]
      end
    end
  end
end
