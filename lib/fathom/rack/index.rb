# frozen_string_literal: true

require_relative "response"
require_relative "../process_comments"

module Fathom
  module Rack
    # The page at the prefix, like Go's /debug/pprof/: each endpoint, what
    # it serves, a link to it (and to its ?debug=1 text), and which process
    # answered. HTML for a client that accepts it (a browser), text
    # otherwise (curl, a scraper's probe). Everything interpolated into the
    # HTML is escaped (#h): the prefix and the host name are configuration,
    # not markup.
    class Index
      ENTRIES = [
        ["heap", "live memory by allocation site (?gc=1 runs a GC first)", "", true],
        ["allocs", "the same profile, alloc_space by default", "", true],
        ["gc", "GC profile for ?seconds=N (?format=firefox)", "?seconds=10", false],
        ["retention", "reference chains keeping memory alive (walked in a forked child)", "", true],
        ["dump", "heap dump in ObjectSpace.dump_all's format, gzipped, for fathom analyze (no string contents)", "", false],
        ["profile", "CPU for ?seconds=N (?mode=wall for wall time)", "?seconds=10", false],
        ["leaks", "leak verdicts as JSON (FATHOM_LEAKS=1); ?holders=FILE:LINE,... snapshots what holds those sites", "", false],
      ].freeze
      ESCAPES = { "&" => "&amp;", "<" => "&lt;", ">" => "&gt;", '"' => "&quot;", "'" => "&#39;" }.freeze

      def initialize(config)
        @config = config
      end

      # base: the path the endpoints' names go under, as the client sees it
      # (SCRIPT_NAME and the prefix); links are absolute, so the page works
      # with and without a trailing slash.
      def response(html:, base: @config.prefix, debug: false)
        return Response.text(text(base)) unless html && !debug

        Response.html(page(base))
      end

      def text(base)
        lines = ["Fathom profiles (go tool pprof http://HOST#{base}/heap), served by #{who}:", ""]
        ENTRIES.each { |name, what, _, _| lines << format("%-11s %s", name, describe(name, what)) }
        "#{lines.join("\n")}\n"
      end

      def page(base)
        rows = ENTRIES.map do |name, what, query, debug|
          link = %(<a href="#{h("#{base}/#{name}#{query}")}">#{h(name)}</a>)
          text = debug ? %( (<a href="#{h("#{base}/#{name}?debug=1")}">text</a>)) : ""
          "<tr><td>#{link}#{text}</td><td>#{h(describe(name, what))}</td></tr>"
        end
        <<~HTML
          <!DOCTYPE html>
          <html><head><meta charset="utf-8"><title>#{h(base)}/</title></head>
          <body>
          <h1>#{h(base)}/</h1>
          <p>Served by #{h(who)}. Each profile is pprof (<code>go tool pprof http://HOST#{h(base)}/heap</code>); add <code>?debug=1</code> for text.</p>
          <table>
          <tr><th>profile</th><th>what it holds</th></tr>
          #{rows.join("\n")}
          </table>
          </body></html>
        HTML
      end

      private

      def describe(name, what)
        return "#{what}; ?force=1 above #{@config.dump_max_objects} objects" if name == "dump"
        return what unless name == "retention"

        "#{what}; ?force=1 above #{@config.retention_max_objects} objects"
      end

      # pid and host: behind a preforking server each worker answers for itself.
      def who
        "pid #{Process.pid} on #{ProcessComments.hostname}"
      end

      def h(text)
        text.to_s.scrub.gsub(/[&<>"']/, ESCAPES)
      end
    end
  end
end
