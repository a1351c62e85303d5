# frozen_string_literal: true

require_relative "trend"

module Fathom
  module Leaks
    # The windows of one process, as series per allocation site, bounded:
    # at most `max_windows` windows (the oldest dropped) and `max_sites`
    # sites, the rest summed into one "(other sites)" series. A site keeps
    # its place by its largest live bytes plus what it grew since it was
    # first kept, so a small site that grows steadily displaces a big flat
    # one, a batch that is empty at this window keeps its place,
    # and one that drops out and comes back starts a new series (its
    # windows in between are unknown, not zero).
    class History
      OTHER = "(other sites)"
      # Per site: what a window says about it (meta from the latest window)
      # and its values from window `first` (an absolute window number) on.
      Track = Struct.new(:key, :meta, :first, :bytes, :objects, :b, keyword_init: true)

      attr_reader :times, :totals, :total_b, :memory, :holders, :exact, :max_sites, :max_windows, :first_window,
                  :windows_seen, :pid, :host, :token

      def initialize(max_sites: 200, max_windows: 120)
        @max_sites = max_sites
        @max_windows = max_windows
        @tracks = {}
        @times = []    # window end, seconds since the epoch
        @totals = []   # in-use bytes of every site
        @total_b = []  # bytes per sample (0: exact)
        @memory = []   # Memory values or nil
        @holders = {}  # site key => the latest holder record found for it
        @first_window = 0 # the absolute number of @times[0]
        @windows_seen = 0
        @exact = nil
      end

      def size
        @times.size
      end

      # Adds a Window (they must come in time order; one older than the last
      # is ignored and false returned).
      def add(window)
        return false if !@times.empty? && window.end_s < @times.last

        @pid ||= window.pid
        @host ||= window.host
        @token ||= window.token
        @exact = window.exact if @exact.nil?
        index = @windows_seen
        @windows_seen += 1
        @times << window.end_s
        @totals << window.total_bytes
        @total_b << window.bytes_per_sample
        @memory << window.memory
        window.holders.each { |h| @holders[h["site"]] = h if h["site"] }
        window.sites.each_value do |site|
          track = @tracks[site.key] ||= Track.new(key: site.key, first: index, bytes: [], objects: [], b: [])
          fill(track, index)
          track.meta = site
          track.bytes << site.bytes
          track.objects << site.objects
          track.b << window.site_bytes_per_sample(site)
        end
        @tracks.each_value { |track| fill(track, index + 1) } # sites without live bytes this window: 0
        trim_windows
        trim_sites
        true
      end

      # [[key, Track], ...] of the sites kept.
      def tracks
        @tracks.values
      end

      # Trend::Points of a site from its first kept window.
      def points(track)
        offset = track.first - @first_window
        Trend::Points.new(@times[offset..], track.bytes.map(&:to_f), track.b)
      end

      # "(other sites)": every site not kept, per window.
      def other_points
        kept = Array.new(size, 0.0)
        @tracks.each_value do |t|
          offset = t.first - @first_window
          t.bytes.each_with_index { |v, i| kept[offset + i] += v }
        end
        Trend::Points.new(@times.dup, @totals.each_with_index.map { |v, i| [v - kept[i], 0.0].max }, @total_b.dup)
      end

      # The process's in-use bytes of Ruby objects per window.
      def total_points
        Trend::Points.new(@times.dup, @totals.map(&:to_f), @total_b.dup)
      end

      private

      # Zero for the windows a track missed, up to (not including) `upto`.
      def fill(track, upto)
        while track.first + track.bytes.size < upto
          track.bytes << 0
          track.objects << 0
          track.b << (@total_b[track.first + track.bytes.size - @first_window] || 0.0)
        end
      end

      def trim_windows
        excess = @times.size - @max_windows
        return unless excess.positive?

        [@times, @totals, @total_b, @memory].each { |a| a.shift(excess) }
        @first_window += excess
        @tracks.delete_if do |_, t|
          drop = @first_window - t.first
          next false unless drop.positive?

          [t.bytes, t.objects, t.b].each { |a| a.shift(drop) }
          t.first = @first_window
          t.bytes.empty?
        end
      end

      def trim_sites
        return if @tracks.size <= @max_sites

        score = ->(t) { t.bytes.max.to_f + [t.bytes.last.to_f - t.bytes.first.to_f, 0.0].max }
        keep = @tracks.values.max_by(@max_sites, &score).to_h { |t| [t.key, true] }
        @tracks.select! { |k, _| keep[k] }
      end
    end
  end
end
