# frozen_string_literal: true

require_relative "history"
require_relative "trend"
require_relative "theil_sen"
require_relative "native_growth"
require_relative "holders"
require_relative "rules"

module Fathom
  module Leaks
    # The verdicts of one process's History: each kept site's class (Trend),
    # the "(other sites)" row's, and the process's growth outside Ruby
    # objects (NativeGrowth). Leaks are the sites classed growing; a site
    # with no Ruby frame ("[not sampled]" rows of a census) is never one
    # (its growth is said, without a line to blame).
    class Analysis
      # garbage: the holder snapshot found most of the site's followed
      # objects unreachable (dead, waiting for a GC): not a leak.
      Verdict = Struct.new(:key, :label, :name, :file, :line, :ruby, :class_name, :bytes, :objects, :samples,
                           :classification, :holder, :growth_share, :growth_basis, :garbage, keyword_init: true) do
        def leak?
          ruby && classification.leak? && !garbage
        end

        def kind
          classification.kind
        end
      end

      attr_reader :history, :rules, :sites, :other, :process

      def initialize(history, rules: Rules.new)
        @history = history
        @rules = rules
        heap = [history.totals.last.to_f, history.memory.last&.dig(:ruby_heap).to_f].max
        @process = NativeGrowth.analyze(history, rules: rules)
        @sites = history.tracks.map { |t| verdict(t.key, t.meta, history.points(t), t.first - history.first_window, heap) }
        @sites.sort_by! { |v| [-rank(v), -v.bytes, v.key] }
        other = history.other_points
        @other = Trend.classify(other, rules: rules, heap_bytes: heap) if other.y.any?(&:positive?)
      end

      def leaks
        @sites.select(&:leak?)
      end

      # Whether anything grows that someone should look at: a leaking site,
      # or the process growing outside Ruby objects.
      def found?
        !leaks.empty? || @process.outside_ruby?
      end

      def windows
        @history.size
      end

      private

      ORDER = { growing: 4, levelling_off: 3, periodic: 2, flat: 1 }.freeze

      def rank(v)
        ORDER.fetch(v.kind, 0)
      end

      # Objects followed by a snapshot, of which at least this share was
      # unreachable: the site's growth is garbage waiting for a GC.
      GARBAGE = 0.5

      def verdict(key, meta, points, offset, heap)
        majors = (offset...@history.size).map { |i| @history.memory[i]&.dig(:gc_major) }
        cls = Trend.classify(points, rules: @rules, heap_bytes: heap, major_gcs: majors)
        holder = Holders.summary(@history.holders[key])
        garbage = garbage?(holder, offset + cls.first)
        share, basis = growth_share(cls, offset) if cls.leak? && !garbage
        Verdict.new(key: key, label: meta.label, name: meta.name, file: meta.file, line: meta.line, ruby: meta.ruby,
                    class_name: meta.top_class, bytes: points.y.last.to_f, objects: meta.objects,
                    samples: meta.samples, classification: cls, holder: holder, growth_share: share,
                    growth_basis: basis, garbage: garbage)
      end

      # A snapshot taken during the segment found most followed objects unreachable.
      def garbage?(holder, first)
        return false unless holder && holder.objects.positive?
        return false if holder.time && holder.time.to_f < @history.times[first].to_f - 1

        holder.unreachable.fdiv(holder.objects) >= GARBAGE
      end

      # The site's growth over its segment as a share of the process's over
      # the same windows: RSS when the windows carry it and it grows
      # steadily (NativeGrowth), else the in-use bytes of all Ruby objects.
      def growth_share(cls, offset)
        range = (offset + cls.first)...@history.size
        t = range.map { |i| @history.times[i] }
        rss = range.map { |i| @history.memory[i]&.dig(:rss) }
        site_growth = cls.growth
        steps = Array.new(t.size) { |i| i.to_f }
        if @process.growing? && rss.none?(&:nil?)
          g = TheilSen.fit(steps, rss.map(&:to_f)).slope * (t.size - 1)
          return [(site_growth / g).clamp(0.0, 1.0), :rss] if g.positive? && g >= site_growth * 0.5
        end
        totals = range.map { |i| @history.totals[i].to_f }
        g = TheilSen.fit(steps, totals).slope * (t.size - 1)
        g.positive? ? [(site_growth / g).clamp(0.0, 1.0), :ruby] : [nil, nil]
      end
    end
  end
end
