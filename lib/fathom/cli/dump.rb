# frozen_string_literal: true

require "uri"

module Fathom
  class CLI
    # `fathom dump URL`: a heap dump of a running server, fetched from its
    # Rack endpoint (/debug/fathom/dump, Fathom::Rack::App), where a forked
    # child writes it: the server pauses for fork() only. The file is the
    # gzipped JSON lines of ObjectSpace.dump_all, for `fathom analyze`.
    # Pure Ruby (net/http), no native extension. In a Ruby process,
    # Fathom.heap_dump(path) writes one directly.
    module Dump
      DEFAULT_OUT = "fathom-dump.json.gz"
      TIMEOUT_RANGE = (1..86_400).freeze
      CHUNK_LIMIT = 1 << 20

      private

      def dump_parser(opts)
        OptionParser.new do |o|
          o.banner = "Usage: fathom dump [options] URL"
          o.separator ""
          o.separator "Fetches a heap dump from a server that mounts Fathom::Rack::App: URL is its"
          o.separator "endpoint (http://127.0.0.1:3000/debug/fathom/dump) or the prefix it lives under"
          o.separator "(http://127.0.0.1:3000/debug/fathom). A forked child writes the dump: the server"
          o.separator "pauses for fork() only. The file is ObjectSpace.dump_all's JSON lines, gzipped,"
          o.separator "without string contents; read it with `fathom analyze FILE`."
          o.separator ""
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

        uri = dump_uri(argv.first, opts[:large])
        timeout = validate { Options.parse_integer("--timeout", opts.fetch(:timeout, "600"), TIMEOUT_RANGE) }
        out = dump_out(opts.fetch(:out, DEFAULT_OUT), opts[:force])
        token = opts.fetch(:token) { ENV["FATHOM_RACK_TOKEN"] }
        token = nil if token&.empty?
        fetch_dump(uri, out, token, timeout, opts[:force] == true)
      end

      # URL -> the /dump endpoint's URI (http or https), with ?force=1 for --large.
      def dump_uri(url, large)
        uri = URI.parse(url)
        raise UsageError, "URL must be http:// or https://, got #{Options.clean(url, 200)}" unless %w[http https].include?(uri.scheme) && uri.host

        uri.path = "#{uri.path.chomp("/")}/dump" unless uri.path.end_with?("/dump")
        uri.query = large ? "force=1" : nil
        uri
      rescue URI::InvalidURIError
        raise UsageError, "not a URL: #{Options.clean(url, 200)}"
      end

      def dump_out(out, force)
        out = File.expand_path(validate { Options.path("--out", out) })
        check_out_dir!(out, "--out")
        AtomicFile.check_target!(out, overwrite: force == true)
      rescue Fathom::Error => e
        raise UsageError, cli_message(e.message)
      end

      # Streams the body into a temp file beside `out` and moves it into
      # place once whole (a gzip, as the server sends). Exit 1 with the
      # server's one-line reason for an HTTP error, or the connection's.
      def fetch_dump(uri, out, token, timeout, force)
        require "net/http"
        dir = File.dirname(out)
        Stdlib.mkdir_p(dir)
        tmp = File.join(dir, AtomicFile.temp_name(File.basename(out)))
        where = Options.clean(uri.to_s, 200)
        begin
          result = File.open(tmp, File::WRONLY | File::CREAT | File::EXCL, 0o600, binmode: true) do |f|
            dump_request(uri, token, timeout) { |chunk| f.write(chunk) }.tap { f.flush && f.fsync }
          end
          return data_error("dump", where, result) if String === result

          unless File.binread(tmp, 2) == "\x1f\x8b".b
            return data_error("dump", where, "the reply is not a gzip file (is URL Fathom's /dump endpoint?)")
          end

          AtomicFile.install(tmp, out, force)
        ensure
          File.unlink(tmp) if File.exist?(tmp)
        end
        @stdout.puts dump_summary(out, result)
        0
      rescue SystemCallError, IOError, Timeout::Error, OpenSSL::SSL::SSLError, Net::HTTPBadResponse => e
        data_error("dump", where, "cannot fetch it: #{e.message.scrub}")
      end

      # Yields the body's chunks; returns the response, or the error text
      # for a status other than 200.
      def dump_request(uri, token, timeout, &block)
        http = Net::HTTP.new(uri.host, uri.port)
        http.use_ssl = uri.scheme == "https"
        http.open_timeout = [timeout, 30].min
        http.read_timeout = timeout
        request = Net::HTTP::Get.new(uri)
        request["authorization"] = "Bearer #{token}" if token
        http.start do
          http.request(request) do |response|
            unless response.code == "200"
              body = +""
              response.read_body { |chunk| body << chunk if body.bytesize < CHUNK_LIMIT }
              return "HTTP #{response.code}: #{body.scrub.strip.delete_prefix("fathom: ").lines.first.to_s.strip}"
            end
            response.read_body(&block)
            return response
          end
        end
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
