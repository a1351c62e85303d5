# frozen_string_literal: true

module Fathom
  module Leaks
    # `fathom leaks --json` and /debug/fathom/leaks: the same verdicts as
    # Text, as data. Rates are bytes per second, times seconds since the
    # epoch, confidence a probability (never 1).
    #
    #   {"leak_found": true, "rules": {...}, "processes": [{"pid": "4242", "host": "web-1",
    #     "windows": 30, "from": ..., "to": ..., "exact": false,
    #     "sites": [{"kind": "growing", "leak": true, "site": "Cart#add app/models/cart.rb:42",
    #                "label": "app/models/cart.rb:42", "file": ..., "line": 42, "class": "String",
    #                "bytes": ..., "objects": ..., "samples": ..., "rate": ..., "rate_low": ...,
    #                "rate_high": ..., "confidence": ..., "windows": 14, "growth": ...,
    #                "growth_share": 0.71, "growth_basis": "rss",
    #                "holders": [{"path": [...], "chain": "...", "objects": 76, "share": 0.95}]}, ...],
    #     "other": {...}, "process": {"kind": "none", "rss_growth": ..., ...}}]}
    module Json
      module_function

      def document(analyses, all: true)
        {
          "leak_found" => analyses.any?(&:found?),
          "rules" => analyses.first&.rules&.to_h&.transform_keys(&:to_s),
          "processes" => analyses.map { |a| process(a, all: all) },
        }
      end

      def process(a, all: true)
        h = a.history
        sites = all ? a.sites : a.sites.reject { |v| v.kind == :flat }
        {
          "pid" => h.pid, "host" => h.host, "windows" => h.size, "from" => h.times.first, "to" => h.times.last,
          "exact" => h.exact ? true : false, "sites_kept" => h.tracks.size, "max_sites" => h.max_sites,
          "sites" => sites.map { |v| site(v) },
          "other" => a.other && classification(a.other),
          "process" => native(a.process),
        }
      end

      def site(v)
        {
          "kind" => v.kind.to_s, "leak" => v.leak?, "site" => v.key, "label" => v.label, "name" => v.name,
          "file" => v.file, "line" => v.line, "class" => v.class_name, "bytes" => v.bytes, "objects" => v.objects,
          "samples" => v.samples, "growth_share" => v.growth_share, "growth_basis" => v.growth_basis&.to_s,
          "holders" => v.holder&.holders&.map { |x| { "path" => x.path, "chain" => x.chain, "objects" => x.objects, "share" => x.share } },
          "holder_time" => v.holder&.time, "holder_objects" => v.holder&.objects,
          "holder_unreachable" => v.holder&.unreachable, "garbage" => v.garbage ? true : false,
        }.merge(classification(v.classification))
      end

      def classification(c)
        {
          "kind" => c.kind.to_s, "windows" => c.windows, "enough_windows" => c.enough, "rate" => finite(c.rate),
          "rate_low" => finite(c.low), "rate_high" => finite(c.high), "growth" => finite(c.growth),
          "confidence" => finite(c.confidence), "p_trend" => finite(c.p_trend), "z" => finite(c.z),
          "releases" => c.releases, "reason" => c.reason&.to_s,
        }
      end

      def native(p)
        {
          "kind" => p.kind.to_s, "windows" => p.windows, "rss_first" => p.rss_first, "rss_last" => p.rss_last,
          "rss_growth" => finite(p.rss_growth), "rss_rate" => finite(p.rss_rate), "confidence" => finite(p.confidence),
          "ruby_growth" => finite(p.ruby_growth), "malloc_growth" => finite(p.malloc_growth),
          "free_growth" => finite(p.free_growth), "heap_growth" => finite(p.heap_growth),
        }
      end

      # JSON has no Infinity: a z of infinity (an exact series) is a big number.
      def finite(x)
        return nil if x.nil?
        return x unless Float === x
        return nil if x.nan?

        x.infinite? ? (x.positive? ? 1e308 : -1e308) : x
      end
    end
  end
end
