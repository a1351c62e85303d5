# frozen_string_literal: true

require "uri"
require_relative "../redact"
require_relative "endpoint_auth"
require_relative "gzip_end"

module Fathom
  class CLI
    # `fathom dump URL`: a heap dump of a running server, fetched from its
    # Rack endpoint (/debug/fathom/dump, Fathom::Rack::App), where a forked
    # child writes it: the server pauses for fork() only. The file is the
    # gzipped JSON lines of ObjectSpace.dump_all, for `fathom analyze`.
    # Pure Ruby (net/http), no native extension. In a Ruby process,
    # Fathom.heap_dump(path) writes one directly.
    #
    # Credentials as EndpointAuth takes them (--token, FATHOM_RACK_TOKEN or
    # user:password@, never two); whatever the server answers is shown
    # with them taken out (Redact).
    module Dump
      DEFAULT_OUT = "fathom-dump.json.gz"
      TIMEOUT_RANGE = (1..86_400).freeze
      # The most of an error reply that is read: it is shown as one line.
      # The rest is never read (the connection is closed).
      ERROR_BODY_LIMIT = 16 << 10

      private

      def dump_parser(opts)
        command_parser("Usage: fathom dump [options] URL", <<~ABOUT) do |o|
          Fetches a heap dump from a server that mounts Fathom::Rack::App: URL is its
          endpoint (http://127.0.0.1:3000/debug/fathom/dump) or the prefix it lives under
          (http://127.0.0.1:3000/debug/fathom). A forked child writes the dump: the server
          pauses for fork() only. The file is ObjectSpace.dump_all's JSON lines, gzipped,
          without string contents; read it with `fathom analyze FILE`. user:password@ in
          URL is sent as basic auth (as curl does), for a proxy that asks for it; it is
          never shown, and cannot be combined with a token.
        ABOUT
          o.on("-o", "--out FILE", "where to write the dump (default: #{DEFAULT_OUT})") { |v| opts[:out] = v }
          o.on("--token TOKEN", "bearer token the server requires (default: FATHOM_RACK_TOKEN)") { |v| opts[:token] = v }
          o.on("--large", "ask for the dump even above the server's dump_max_objects (?force=1)") { opts[:large] = true }
          o.on("--timeout SECONDS", "give up after this long without data (default: 600)") { |v| opts[:timeout] = v }
          o.on("--force", "replace an existing FILE that Fathom did not write (never a link or a device)") { opts[:force] = true }
          o.on("-h", "--help", "show this help") { opts[:help] = true }
        end
      end

      def dump_command(argv)
        opts = {}
        return 0 if parse_or_help(dump_parser(opts), argv, opts, order: false)
        raise UsageError, "missing URL (e.g. fathom dump http://127.0.0.1:3000/debug/fathom)" if argv.empty?
        raise UsageError, "too many arguments: #{printable(argv).join(" ")}" if argv.size > 1

        uri, basic = dump_uri(argv.first, opts[:large])
        timeout = validate { Options.parse_integer("--timeout", opts.fetch(:timeout, "600"), TIMEOUT_RANGE) }
        out = dump_out(opts.fetch(:out, DEFAULT_OUT), opts[:force])
        fetch_dump(uri, out, endpoint_auth(opts, basic), timeout, opts[:force] == true)
      end

      # URL -> [the /dump endpoint's URI without its userinfo, with
      # ?force=1 for --large; [user, password] or nil] (EndpointAuth).
      def dump_uri(url, large)
        endpoint_uri(url, query: large ? "force=1" : nil) { |path| path.end_with?("/dump") ? path : "#{path.chomp("/")}/dump" }
      end

      def dump_out(out, force)
        out = File.expand_path(validate { Options.path("--out", out) })
        check_out_dir!(out, "--out")
        Files::AtomicFile.check_target!(out, overwrite: force == true)
      rescue Fathom::Error => e
        raise UsageError, cli_message(e.message)
      end

      # Streams the body into a temp file beside `out` and moves it into
      # place once whole: as long as its Content-Length says, or, without
      # one, a gzip stream that came to its end (GzipEnd). Net::HTTP takes
      # an early EOF for the end of a body, so a cut connection looked like
      # a finished dump ("wrote", exit 0, then `fathom analyze`: "unexpected
      # end of file"). Exit 1 with the server's one-line reason for an HTTP
      # error, or the connection's; no file is left either way.
      def fetch_dump(uri, out, auth, timeout, force)
        require "net/http"
        dir = File.dirname(out)
        Files::Stdlib.mkdir_p(dir)
        tmp = File.join(dir, Files::AtomicFile.temp_name(File.basename(out)))
        where = Options.clean(uri.to_s, 200)
        secrets = auth ? auth.last : []
        begin
          result = File.open(tmp, File::WRONLY | File::CREAT | File::EXCL, 0o600, binmode: true) do |f|
            dump_request(uri, auth, timeout, secrets) { |chunk| f.write(chunk) }.tap { f.flush && f.fsync }
          end
          return data_error("dump", where, result) if String === result

          unless File.binread(tmp, 2) == "\x1f\x8b".b
            return data_error("dump", where, "the reply is not a gzip file (is URL Fathom's /dump endpoint?)")
          end

          Files::AtomicFile.install(tmp, out, force)
        ensure
          File.unlink(tmp) if File.exist?(tmp)
        end
        @stdout.puts dump_summary(out, result)
        0
      rescue SystemCallError, IOError, Timeout::Error, OpenSSL::SSL::SSLError, Net::HTTPBadResponse, Zlib::Error => e
        data_error("dump", where, "cannot fetch it: #{Redact.message(e.message, secrets: secrets || [], max: 300)}")
      end

      # Yields the body's chunks; returns the response, or the error text
      # for a status other than 200 or a body that did not come whole.
      def dump_request(uri, auth, timeout, secrets, &block)
        http = remote_http(uri, open_timeout: [timeout, 30].min, read_timeout: timeout)
        request = Net::HTTP::Get.new(uri)
        request["authorization"] = auth.first if auth
        # The bytes as sent: Net::HTTP would otherwise ask for gzip and
        # inflate a gzip-encoded reply, whose Content-Length is then not
        # what the body adds up to.
        request["accept-encoding"] = "identity"
        http.start do
          http.request(request) do |response|
            # Returning leaves the rest of the body unread; http.start closes the connection.
            return error_reply(response, secrets) unless response.code == "200"

            return whole_body(response, &block) || response
          end
        end
      end

      # "HTTP <code>: <the first line of the reply>", read up to ERROR_BODY_LIMIT.
      def error_reply(response, secrets)
        body = "".b
        cut = false
        response.read_body do |chunk|
          body << chunk
          next unless body.bytesize > ERROR_BODY_LIMIT

          body = body.byteslice(0, ERROR_BODY_LIMIT)
          cut = true
          break
        end
        line = Redact.text(body, secrets: secrets, cut: cut).scrub.strip.delete_prefix("fathom: ").lines.first.to_s.strip
        "HTTP #{response.code}: #{Options.clean(line, 300)}"
      end

      # Yields the body's chunks; nil when it came whole, else why not.
      def whole_body(response)
        length = response["content-length"]&.then { |v| Integer(v, 10) rescue nil } # rubocop:disable Style/RescueModifier
        gzip = GzipEnd.new unless length
        received = 0
        response.read_body do |chunk|
          received += chunk.bytesize
          gzip << chunk if gzip
          yield chunk
        end
        if length && received != length
          "the reply ended after #{received} of its #{length} bytes (the connection was cut); nothing was written"
        elsif gzip && !gzip.ended?
          "the reply ended before its gzip stream did, after #{received} bytes (the connection was cut); nothing was written"
        end
      ensure
        gzip&.close
      end

      def dump_summary(out, response)
        size = File.size(out)
        objects = response["x-fathom-objects"]
        fork_ns = response["x-fathom-fork-ns"].to_i
        what = objects ? "#{objects} objects, " : ""
        paused = fork_ns.positive? ? format("; the server paused %.1f ms for fork()", fork_ns / 1e6) : ""
        "fathom: wrote #{out} (#{what}#{format("%.1f", size / 1e6)} MB#{paused}); read it with: fathom analyze #{out}"
      end
    end
    include Dump
  end
end
