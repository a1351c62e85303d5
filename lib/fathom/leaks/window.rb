# frozen_string_literal: true

require_relative "../report/frames"
require_relative "../report/kind"
require_relative "../error"
require_relative "memory"

module Fathom
  module Leaks
    # One heap profile seen as one window of a leak series: in-use bytes,
    # objects and samples per allocation *site* (the innermost Ruby frame,
    # C methods folded into the line that called them), the totals, and
    # what the process wrote beside
    # it (its memory, Leaks::Memory; holders found by a snapshot). The site
    # is Report::Frames.site's: the same rows `fathom report --by site`
    # prints.
    class Window
      # One site's values in this window. classes: {class label => bytes}.
      Site = Struct.new(:key, :name, :file, :line, :ruby, :bytes, :objects, :samples, :classes, keyword_init: true) do
        # "app/models/cart.rb:42", as users read a site.
        def label
          ruby ? "#{Report::Gems.short_path(file)}:#{line}" : name
        end

        def top_class
          classes.max_by { |c, v| [v, c] }&.first
        end
      end

      HOLDERS_COMMENT = "fathom.leaks.holders "
      # Objects allocated on Fathom's own threads (the flusher, this
      # monitor, the endpoints' profile thread, the push sender), by their
      # "thread" label: Fathom itself, never a site of the program's.
      OWN_THREAD = /\Afathom-/.freeze

      attr_reader :pid, :host, :token, :start_s, :end_s, :exact, :sites, :total_bytes, :total_objects,
                  :total_samples, :memory, :holders, :source, :own_bytes

      # profile: a decoded heap profile (Fathom::Pprof::Profile). source:
      # where it came from, for messages. token: the process image's token
      # (from an always-on file name), to tell apart processes that share
      # a pid.
      # [key, Frame] of a stack: its innermost Ruby frame (Report::Frames.site,
      # the report's rows by site), looked for from the leaf outwards only
      # as far as needed; a stack without one is its leaf's. Also the key
      # PushLabels matches a pushed sample by.
      def self.site_of(frames, location_ids)
        leaf = nil
        location_ids.each do |id|
          frames.location(id).each do |frame|
            return [frame.site_label, frame] if frame.ruby?

            leaf ||= frame
          end
        end
        leaf ? [leaf.name, leaf] : ["(no stack)", nil]
      end

      def self.from_profile(profile, source: nil, token: nil)
        unless Report.kind(profile) == :heap
          raise Fathom::Error, "fathom: #{source || "the profile"} is a #{Report.kind(profile)} profile; fathom leaks reads heap profiles"
        end

        new(profile, source, token)
      end

      def initialize(profile, source, token)
        @source = source
        @token = token
        space = profile.sample_type_index("inuse_space")
        raise Fathom::Error, "fathom: #{source || "the profile"} has no inuse_space values" unless space

        objects = profile.sample_type_index("inuse_objects")
        counts = profile.sample_type_index("inuse_samples")
        @exact = profile.period_type == %w[allocations count]
        comments = profile.comments || []
        @pid = comments.find { |c| c.start_with?("pid=") }&.delete_prefix("pid=")
        @host = comments.find { |c| c.start_with?("hostname=") }&.delete_prefix("hostname=")
        @memory = Memory.parse(comments)
        @holders = comments.filter_map { |c| parse_holders(c.delete_prefix(HOLDERS_COMMENT)) if c.start_with?(HOLDERS_COMMENT) }.flatten
        @start_s = profile.time_nanos.to_i / 1e9
        @end_s = (profile.time_nanos.to_i + profile.duration_nanos.to_i) / 1e9
        @sites = {}
        @total_bytes = 0
        @total_objects = 0
        @total_samples = 0
        @own_bytes = 0
        frames = Report::Frames.new(profile)
        sites_by_stack = {}
        profile.samples.each do |sample|
          bytes = sample.values[space].to_i
          next unless bytes.positive?

          thread = sample.labels["thread"]
          if String === thread && OWN_THREAD.match?(thread)
            @own_bytes += bytes
            next
          end

          count = objects ? sample.values[objects].to_i : 0
          n = counts ? sample.values[counts].to_i : 0
          @total_bytes += bytes
          @total_objects += count
          @total_samples += n
          key, frame = sites_by_stack[sample.location_ids] ||= site_of(frames, sample.location_ids)
          site = (@sites[key] ||= new_site(key, frame))
          site.bytes += bytes
          site.objects += count
          site.samples += n
          label = sample.labels["class"]
          label = label.compact.join(" ") if Array === label
          site.classes[label || "?"] += bytes
        end
      end

      # Bytes one sample stands for on average (0 in exact mode): the
      # uncertainty of a site with no sample in this window.
      def bytes_per_sample
        return 0.0 if @exact || @total_samples.zero?

        @total_bytes.fdiv(@total_samples)
      end

      # A site's bytes per sample here (its own, else the window's).
      def site_bytes_per_sample(site)
        return 0.0 if @exact
        return bytes_per_sample if site.nil? || site.samples.zero?

        site.bytes.fdiv(site.samples)
      end

      # Which process wrote it: "pid/token" (token when known).
      def process_key
        [@pid || "?", @token].compact.join("/")
      end

      private

      def site_of(frames, location_ids)
        self.class.site_of(frames, location_ids)
      end

      def new_site(key, frame)
        if frame&.ruby?
          Site.new(key: key, name: frame.name, file: frame.file, line: frame.line, ruby: true, bytes: 0, objects: 0,
                   samples: 0, classes: Hash.new(0))
        else
          Site.new(key: key, name: key, file: nil, line: nil, ruby: false, bytes: 0, objects: 0, samples: 0,
                   classes: Hash.new(0))
        end
      end

      def parse_holders(text)
        require "json" # here, not at load (lib/fathom/files/stdlib.rb)
        data = JSON.parse(text)
        Array === data ? data.select { |h| Hash === h } : []
      rescue JSON::ParserError
        []
      end
    end
  end
end
