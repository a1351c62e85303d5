# frozen_string_literal: true

require_relative "frames"
require_relative "gems"

module Fathom
  module Report
    # The rows of a table (View::BY): what each sample counts for, flat
    # (the row of its leaf) and cum (every row its stack passes through,
    # once per sample however often it recurs).
    #
    #   function  the leaf function, as `go tool pprof -top`
    #   site      the innermost Ruby frame, "Foo#bar path.rb:12" (Frames.site:
    #             C methods folded into the line that called them)
    #   line      the same line as "path.rb:12", printed with its source
    #   file      the site's file
    #   gem       the site's library (Gems.of: a gem, "csv (stdlib)", "app")
    #   class     the sample's "class" label (heap profiles), or the class
    #             of a retention frame, "(Hash)"
    #
    # For site, line, file and gem, cum counts the Ruby frames of the stack
    # (a stack without one counts its frames): "--by gem" cum is what ran
    # through a gem's code at any depth, flat what its own lines did.
    class Grouping
      CLASS_OF_FRAME = /\(([^()]*)\)\z/.freeze

      attr_reader :by, :frames

      def initialize(profile, by)
        @by = by
        @frames = Frames.new(profile)
        @cache = {}
        # Row key => the Frame it stands for (site, line, file), for the
        # source listing and --method.
        @frame_of = {}
      end

      # [flat key, cum keys] of a sample; nil for a sample without a stack
      # (it still counts in the total).
      def keys(sample)
        if @by == :class
          label = sample.labels["class"]
          label = label.compact.join(" ") if Array === label
          label ||= class_of_frame(sample)
          return [label, [label]]
        end
        ids = sample.location_ids
        return nil if ids.empty?

        @cache[ids] ||= compute(@frames.stack(sample))
      end

      # The Frame behind a row (site, line, file), or nil.
      def frame_of(key)
        @frame_of[key]
      end

      private

      def compute(stack)
        if @by == :function
          names = stack.map(&:name)
          return [names.first, names.uniq]
        end
        ruby = stack.select(&:ruby?)
        # No Ruby frame at all (a "[not sampled]" row, a file without file
        # names): its frames are the rows, as by function.
        ruby = stack if ruby.empty?
        keys = ruby.map { |f| key(f) }
        [keys.first, keys.uniq]
      end

      def key(frame)
        k = case @by
            when :site then frame.site_label
            when :line then frame.line_label
            when :file then frame.file_label
            else frame.gem
            end
        @frame_of[k] ||= frame
        k
      end

      # A retention profile's samples carry no class label: the leaf frame
      # says it, "@payload (String)".
      def class_of_frame(sample)
        id = sample.location_ids.first or return "<none>"
        frame = @frames.location(id).first
        frame.name[CLASS_OF_FRAME, 1] || "<none>"
      end
    end
  end
end
