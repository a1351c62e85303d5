# frozen_string_literal: true

require_relative "rules"
require_relative "native_growth"

module Fathom
  module Leaks
    # `fathom leaks` in words: one header line per process, a verdict line
    # per site that is not flat, the process's growth outside Ruby objects,
    # and a last line that says what was found.
    #
    #   LEAK  app/models/cart.rb:42 (String)  +1.9 MB/min (1.6–2.2), 99.99% confidence over 14 windows;
    #     held by Cart::CACHE (Hash) → $hashval (Cart) (96%); 71% of the process's growth
    #
    # (one line). Figures are bytes in powers of 1024, as pprof prints them.
    module Text
      UNITS = [["GB", 1 << 30], ["MB", 1 << 20], ["kB", 1 << 10]].freeze
      NATIVE = {
        outside_ruby: "growth outside Ruby objects (C extensions, or memory Ruby does not account as objects)",
        fragmentation: "fragmentation: malloc keeps freed memory in its arenas (MALLOC_ARENA_MAX=2, or jemalloc, " \
                       "usually cure it)",
        ruby_heap: "Ruby's heap keeps pages its objects no longer fill (they grew, then died): " \
                   "its GC sizing, not a leak",
        unexplained: "growth outside malloc and Ruby's heap (memory mapped by a library, thread stacks)",
      }.freeze
      RULE_Z = Rules::DEFAULTS[:z]
      CLASS_WORDS = { growing: "growing", levelling_off: "levelling off", periodic: "periodic", flat: "flat" }.freeze

      module_function

      def render(analyses, all: false, top: 20)
        out = +""
        analyses.each { |a| out << process(a, all: all, top: top) }
        found = analyses.sum { |a| a.leaks.size }
        native = analyses.count { |a| a.process.outside_ruby? }
        out << if found.positive? || native.positive?
                 parts = []
                 parts << "#{found} leaking site#{"s" unless found == 1}" if found.positive?
                 parts << "growth outside Ruby objects in #{native} process#{"es" unless native == 1}" if native.positive?
                 "Found: #{parts.join("; ")}.\n"
               else
                 "No leak found.\n"
               end
        out
      end

      def process(analysis, all:, top:)
        h = analysis.history
        rules = analysis.rules
        out = +"#{header(h)}\n"
        if h.size < rules.min_windows
          out << "  only #{h.size} window#{"s" unless h.size == 1}: a verdict needs #{rules.min_windows} " \
                 "(wait #{rules.min_windows - h.size} more flushes)\n"
        end
        shown = analysis.sites.reject { |v| v.kind == :flat && !all }.first(top)
        shown.each { |v| out << "#{site_line(v, h)}\n" }
        flat = analysis.sites.count { |v| v.kind == :flat }
        if flat.positive? && !all
          out << "flat  #{flat} site#{"s" unless flat == 1} (--all lists them)\n"
        end
        if analysis.other && analysis.other.kind != :flat
          out << "#{CLASS_WORDS.fetch(analysis.other.kind)}  (sites beyond the #{h.max_sites} kept, together)" \
                 "  #{rate(analysis.other.rate)}\n"
        end
        out << "#{native_line(analysis.process)}\n"
        out << "\n"
      end

      def header(h)
        who = ["pid #{h.pid || "?"}", h.host && "on #{h.host}"].compact.join(" ")
        span = h.times.size > 1 ? h.times.last - h.times.first : 0
        every = h.times.size > 1 ? span / (h.times.size - 1) : 0
        mode = h.exact ? "exact heap profiles" : "sampled heap profiles"
        when_ = h.times.empty? ? "" : ", #{iso(h.times.first)} to #{iso(h.times.last)}"
        "#{who}: #{h.size} window#{"s" unless h.size == 1}#{when_} (every #{duration(every)}), #{mode}"
      end

      def site_line(v, history)
        c = v.classification
        what = "#{v.label}#{" (#{v.class_name})" if v.class_name && v.class_name != "?"}"
        few = !history.exact && v.samples < 10 ? " [few samples: #{v.samples}]" : ""
        case c.kind
        when :growing
          if v.garbage
            "growing  #{what}  #{rate_range(c.rate, c.low, c.high)} over #{c.windows} windows; not a leak: a " \
              "snapshot found #{v.holder.unreachable} of the #{v.holder.objects} objects it followed unreachable " \
              "(garbage waiting for a GC)#{few}"
          elsif !c.leak?
            why = if c.reason == :major_gc
                    "no major GC has run since it began (until one runs, dead objects of the old generation " \
                      "count as in use)"
                  else
                    "the last windows rise by #{format("%.1f", c.recent_z)} standard deviations of their noise, " \
                      "a leak needs #{format("%g", RULE_Z)}"
                  end
            "growing  #{what}  #{rate_range(c.rate, c.low, c.high)} over #{c.windows} windows; not yet a " \
              "verdict: #{why}#{few}"
          elsif v.ruby
            text = "LEAK  #{what}  #{rate_range(c.rate, c.low, c.high)}, #{percent(c.confidence)} confidence " \
                   "over #{c.windows} windows"
            text << "; #{holder_text(v.holder)}"
            text << "; #{share_text(v)}" if v.growth_share
            text << few
          else
            "GROWING  #{what}  #{rate_range(c.rate, c.low, c.high)}, #{percent(c.confidence)} confidence " \
              "over #{c.windows} windows: objects no sample reached the site of (FATHOM_EXACT=1 names it)"
          end
        when :levelling_off
          "levelling off  #{what}  #{size(v.bytes)} now; it grew, and has stopped growing (a cache filling up?)#{few}"
        when :periodic
          "periodic  #{what}  #{size(v.bytes)} now; built and released #{c.releases} time#{"s" unless c.releases == 1}#{few}"
        else
          "flat  #{what}  #{size(v.bytes)}#{few}"
        end
      end

      def holder_text(summary)
        if summary.nil? || summary.holders.empty?
          return "holder not known yet (FATHOM_LEAKS=1 snapshots it once confident; or fathom leaks URL)" if summary.nil?

          return "held by nothing reachable (the #{summary.objects} objects followed were garbage)"
        end
        shown = summary.holders.first(2).map { |h| "#{h.chain} (#{(h.share * 100).round}%)" }
        "held by #{shown.join(", and ")}"
      end

      def share_text(v)
        basis = v.growth_basis == :rss ? "the process's growth" : "the growth of Ruby objects"
        "#{(v.growth_share * 100).round}% of #{basis}"
      end

      def native_line(p)
        case p.kind
        when :unknown
          "process: no memory figures in these windows (written by a Fathom without them)"
        when :none
          return "process: too few windows with memory figures" if p.windows.to_i < 2

          grew = p.rss_growth.to_f.positive? ? " (#{signed(p.rss_growth)} over #{p.windows} windows: not a steady growth, or below #{size(NativeGrowth::RSS_BYTES)})" : ""
          "process: RSS #{size(p.rss_last)}, not growing#{grew}"
        when :ruby
          "process: RSS #{signed(p.rss_growth)} over #{p.windows} windows; Ruby objects #{signed(p.ruby_growth)}: " \
            "Ruby objects explain it"
        when :ruby_heap
          "process: RSS #{signed(p.rss_growth)} over #{p.windows} windows; Ruby objects #{signed(p.ruby_growth)}; " \
            "Ruby heap pages #{signed(p.heap_growth)}: #{NATIVE.fetch(:ruby_heap)}"
        else
          figures = ["RSS #{signed(p.rss_growth)} (#{rate(p.rss_rate)}, #{percent(p.confidence)} confidence over " \
                     "#{p.windows} windows)"]
          figures << "Ruby objects #{signed(p.ruby_growth)}" if p.ruby_growth
          figures << "malloc in use #{signed(p.malloc_growth)}" if p.malloc_growth
          figures << "free inside malloc's arenas #{signed(p.free_growth)}" if p.kind == :fragmentation && p.free_growth
          "GROWTH OUTSIDE RUBY  #{figures.join("; ")}: #{NATIVE.fetch(p.kind)}"
        end
      end

      # "+1.9 MB/min".
      def rate(bytes_per_s)
        "#{bytes_per_s.negative? ? "-" : "+"}#{size(bytes_per_s.abs * 60)}/min"
      end

      # "+1.9 MB/min (1.6–2.2)": the interval in the rate's unit.
      def rate_range(bytes_per_s, low, high)
        unit = UNITS.find { |_, f| bytes_per_s.abs * 60 >= f } || ["B", 1]
        f = ->(x) { number(x * 60 / unit[1]) }
        "#{rate(bytes_per_s)} (#{f.call(low)}\u2013#{f.call(high)})"
      end

      def signed(bytes)
        return "?" if bytes.nil?

        "#{bytes.negative? ? "-" : "+"}#{size(bytes.abs)}"
      end

      def size(bytes)
        bytes = bytes.to_f
        name, factor = UNITS.find { |_, f| bytes.abs >= f } || ["B", 1]
        "#{number(bytes / factor)} #{name}"
      end

      def number(x)
        x.abs >= 100 || x.round(1) == x.round ? x.round.to_s : format("%.1f", x)
      end

      # Never "100%": "99.99%" at most.
      def percent(p)
        return "0%" if p <= 0
        return ">99.99%" if p > 0.9999

        digits = p >= 0.99 ? 2 : 1
        format("%.#{digits}f%%", (p * 100).floor(digits))
      end

      def duration(seconds)
        if seconds >= 120 then "#{(seconds / 60).round(1)} min"
        elsif seconds >= 1 then "#{seconds.round(1)} s"
        else "#{(seconds * 1000).round} ms"
        end
      end

      def iso(seconds)
        Time.at(seconds).utc.strftime("%Y-%m-%d %H:%M:%SZ")
      end
    end
  end
end
