# frozen_string_literal: true

require "uri"
require_relative "../leaks/rules"
require_relative "../redact"
require_relative "endpoint_auth"
require_relative "../monotonic"

module Fathom
  class CLI
    # `fathom leaks DIR|FILE...` and `fathom leaks URL`: verdicts from a
    # series of heap profiles (Leaks::Analysis), in words or --json. Pure
    # Ruby, no native extension. Exit status 3 when a leak (or growth
    # outside Ruby objects) is found, so that CI and cron can act on it.
    module LeaksCommand
      FOUND = 3
      DEFAULT_EVERY = "30s"
      DEFAULT_FOR = "20m"
      TIMEOUT = 60

      private

      def leaks_parser(opts)
        command_parser("Usage: fathom leaks [options] DIR|FILE...\n       fathom leaks [options] URL [--every 30s --for 20m]", <<~ABOUT) do |o|
          Which allocation sites grow, what holds them, and how sure: each site's in-use bytes
          over a series of heap profiles (always-on files: FATHOM_DIR; or a server's
          /debug/fathom, fetched every --every for --for), classed growing (LEAK), levelling
          off, periodic or flat, and the process's growth outside Ruby objects (RSS, malloc).
          Exit status 3 when something leaks, 0 when not.
        ABOUT
          o.on("--json", "the verdicts as JSON") { opts[:json] = true }
          o.on("--all", "list the flat sites too") { opts[:all] = true }
          o.on("--top N", "site lines to show per process (default: 20)") { |v| opts[:top] = v }
          o.on("--min-windows N", "windows a series needs before it can be a leak " \
                                  "(default: #{Leaks::Rules::DEFAULTS[:min_windows]})") { |v| opts[:min_windows] = v }
          o.on("--windows N", "the last N windows of each process (default: 120)") { |v| opts[:windows] = v }
          o.on("--sites N", "sites kept per process, the rest summed as one (default: 200)") { |v| opts[:sites] = v }
          o.on("--every DUR", "URL: how often to fetch the heap profile (default: #{DEFAULT_EVERY})") { |v| opts[:every] = v }
          o.on("--for DUR", "URL: for how long (default: #{DEFAULT_FOR}); stops early once a leak's holder is known") { |v| opts[:for] = v }
          o.on("--token TOKEN", "URL: bearer token the server requires (default: FATHOM_RACK_TOKEN)") { |v| opts[:token] = v }
          o.on("--no-holders", "URL: do not ask the server to snapshot what holds a leaking site") { opts[:no_holders] = true }
          o.on("-h", "--help", "show this help") { opts[:help] = true }
        end
      end

      def leaks_command(argv)
        opts = {}
        return 0 if parse_or_help(leaks_parser(opts), argv, opts, order: false)
        raise UsageError, "missing DIR, FILE or URL (e.g. fathom leaks /var/tmp/fathom)" if argv.empty?

        require_relative "../leaks/files"
        require_relative "../leaks/analysis"
        require_relative "../leaks/text"
        require_relative "../leaks/json"
        rules = validate do
          Leaks::Rules.new(min_windows: Options.parse_integer("--min-windows", opts.fetch(:min_windows, Leaks::Rules::DEFAULTS[:min_windows].to_s),
                                                              Leaks::Rules::MIN_WINDOWS_RANGE))
        end
        windows = validate { Options.parse_integer("--windows", opts.fetch(:windows, "120"), 4..100_000) }
        sites = validate { Options.parse_integer("--sites", opts.fetch(:sites, "200"), 1..100_000) }
        top = top_option(opts)
        if argv.any? { |a| a.to_s.match?(%r{\Ahttps?://}i) }
          raise UsageError, "one URL at a time, and not with files" unless argv.size == 1

          histories = leaks_live(argv.first, opts, rules, windows, sites) or return 1
        else
          %i[every for token no_holders].each do |o|
            raise UsageError, "--#{o.to_s.tr("_", "-")} is for a URL" if opts.key?(o)
          end
          histories = leaks_files(argv, windows, sites) or return 1
        end
        analyses = histories.map { |h| Leaks::Analysis.new(h, rules: rules) }
        if opts[:json]
          require "json"
          @stdout.puts JSON.pretty_generate(Leaks::Json.document(analyses, all: true))
        else
          @stdout.print Leaks::Text.render(analyses, all: opts[:all], top: top)
        end
        analyses.any?(&:found?) ? FOUND : 0
      end

      def leaks_files(paths, windows, sites)
        paths.each do |p|
          next if File.exist?(p)

          data_error("leaks", p, "no such file or directory")
          return nil
        end
        loaded = begin
          Leaks::Files.load(paths, max_sites: sites, max_windows: windows)
        rescue Fathom::Error => e
          # Files names the file it read ("fathom: PATH: why"): said once.
          why = e.message.delete_prefix("fathom: ")
          named = paths.find { |p| why.start_with?("#{p}: ") }
          return data_error("leaks", named, why.delete_prefix("#{named}: ")) && nil if named

          return data_error("leaks", paths.size == 1 ? paths.first : "a file", e.message) && nil
        rescue SystemCallError => e
          return data_error("leaks", paths.size == 1 ? paths.first : "a file", e.message.scrub) && nil
        end
        loaded.skipped.each do |path, why|
          why = why.delete_prefix("fathom: ").delete_prefix("#{path}: ")
          @stderr.puts "fathom leaks: skipped #{Options.clean(path, 200)}: #{Options.clean(why, 300)}"
        end
        if loaded.histories.empty?
          data_error("leaks", paths.join(" "), "no heap profile found (always-on heap files are heap-<pid>-…pb.gz)")
          return nil
        end
        loaded.histories
      end

      # ---- a live server
      #
      # As `fathom dump` fetches (cli/dump.rb): user:password@ in the URL is
      # sent as Basic auth and never shown (Redact.url), a reply is read up
      # to a bound (a heap profile to HEAP_LIMIT, an error to
      # ERROR_BODY_LIMIT) so that a server that never stops talking cannot
      # grow this process, and the server's words are shown with the
      # credentials taken out.

      HEAP_LIMIT = 64 << 20
      HOLDERS_LIMIT = 1 << 20 # /leaks?holders=: a JSON record per site, ten sites at most

      # A reply that is not the profile: its one-line reason.
      class FetchError < StandardError; end

      def leaks_live(url, opts, rules, windows, sites)
        require "net/http"
        require "openssl" # for the rescue below, before any https request loaded it
        base, basic = leaks_base(url)
        every = validate { Options.duration_ns("--every", opts.fetch(:every, DEFAULT_EVERY), min_ns: 10_000_000) } / 1e9
        span = validate { Options.duration_ns("--for", opts.fetch(:for, DEFAULT_FOR), min_ns: 1_000_000) } / 1e9
        auth = endpoint_auth(opts, basic)
        history = Leaks::History.new(max_sites: sites, max_windows: windows)
        started = Monotonic.now
        count = (span / every).floor + 1
        count.times do |i|
          wait = started + i * every - Monotonic.now
          sleep(wait) if wait.positive?
          bytes = leaks_get(base, "heap", auth, HEAP_LIMIT)
          window = with_data("leaks", base) { Leaks::Window.from_profile(Report.decode(bytes), source: base) } or return nil
          history.add(window)
          @stderr.puts "fathom leaks: window #{history.size} of #{count} from pid #{window.pid || "?"}" if $stderr.tty?
          # Early, as --for's help says: a leak is confident, so its holder
          # can be asked for now.
          break if !opts[:no_holders] && history.size >= rules.min_windows && Leaks::Analysis.new(history, rules: rules).leaks.any?
        end
        leaks_holders(base, history, auth, rules) unless opts[:no_holders]
        [history]
      rescue FetchError => e
        data_error("leaks", base, e.message)
        nil
      rescue SystemCallError, IOError, Timeout::Error, OpenSSL::SSL::SSLError, Net::HTTPBadResponse => e
        data_error("leaks", base || Options.clean(Redact.url(url), 200),
                   "cannot fetch it: #{Redact.message(e.message.scrub, secrets: auth ? auth.last : [], max: 300)}")
        nil
      end

      # Asks the server to follow the leaking sites' live sampled objects in
      # a retention snapshot (/debug/fathom/leaks?holders=FILE:LINE,...).
      def leaks_holders(base, history, auth, rules)
        require "json" # also for the rescue below
        analysis = Leaks::Analysis.new(history, rules: rules)
        sites = analysis.leaks.first(10)
        return if sites.empty?

        query = URI.encode_www_form("holders" => sites.map { |v| "#{v.file}:#{v.line}" }.join(","))
        begin
          body = leaks_get(base, "leaks?#{query}", auth, HOLDERS_LIMIT)
        rescue FetchError => e
          @stderr.puts "fathom leaks: the server did not snapshot the holders: #{e.message}"
          return
        end
        records = JSON.parse(body.dup.force_encoding(Encoding::UTF_8))["holders"]
        return unless Array === records

        sites.each do |v|
          record = records.find { |r| Hash === r && r["site"] == "#{v.file}:#{v.line}" } or next
          history.holders[v.key] = record.merge("site" => v.key)
        end
      rescue JSON::ParserError
        @stderr.puts "fathom leaks: the server's holders are not JSON"
      end

      # URL -> [the endpoints' base URL without userinfo (…/debug/fathom),
      # [user, password] or nil] (EndpointAuth).
      def leaks_base(url)
        uri, basic = endpoint_uri(url) { |path| path.chomp("/").sub(%r{/(heap|leaks)\z}, "") }
        [uri.to_s, basic]
      end

      # The body of GET base/path, at most `limit` bytes; FetchError with
      # "HTTP <code>: <the server's line>" or why the body is refused.
      def leaks_get(base, path, auth, limit)
        require "net/http"
        uri = URI.parse("#{base}/#{path}")
        http = remote_http(uri, open_timeout: 30, read_timeout: TIMEOUT * 10)
        request = Net::HTTP::Get.new(uri)
        request["authorization"] = auth.first if auth
        request["accept-encoding"] = "identity" # the bytes as sent: the bound is on what arrives
        secrets = auth ? auth.last : []
        http.start do
          http.request(request) do |response|
            raise FetchError, error_reply(response, secrets) unless response.code == "200"

            body = "".b
            response.read_body do |chunk|
              body << chunk
              raise FetchError, "the reply is over #{limit >> 20} MB: not what #{path[/\A[a-z]+/]} serves (is URL Fathom's /debug/fathom?)" if body.bytesize > limit
            end
            return body
          end
        end
      end
    end
    include LeaksCommand
  end
end
