# frozen_string_literal: true

require_relative "../options"
require_relative "../error"
require_relative "frames"

module Fathom
  module Report
    # How a report looks at a profile, beyond which value (sample_index)
    # and how many rows (top): the rows (by), their order (sort), and which
    # samples and frames count (the filters). One object for the Ruby API
    # (Profile#report(by: :line, focus: "app/")) and the CLI (`fathom
    # report --by line --focus app/`), checked the same way; its messages
    # name the option as the caller spells it (`by` or `--by`).
    #
    #   by       function (pprof's rows), site (the innermost Ruby line, C
    #            methods folded into it: the default for heap profiles), line
    #            (the site's file:line, with its source), file, gem, class
    #   sort     flat or cum
    #   focus    keep the samples with a frame whose name or file matches
    #   ignore   drop the samples with a frame whose name or file matches
    #   hide     take the matching frames out of every stack (their values
    #            fall to their callers: `hide: "/gems/"` charges a gem's
    #            allocations to the app line that called into it)
    #   thread   keep one thread's samples (its name or id)
    #   hide_gc  drop GC: samples taken while the thread was in GC, and the
    #            "Garbage Collection" frames (CPU/wall profiles)
    #   notes    print the profile's own comments and the notes on how its
    #            numbers were estimated (off: one line says it in words)
    #
    # Patterns are Ruby regular expressions, matched against each frame's
    # function name and its file path. focus and ignore follow `go tool
    # pprof`'s -focus and -ignore, hide its -hide.
    class View
      BY = %i[function site line file gem class].freeze
      SORTS = %i[flat cum].freeze
      # Filters apply to profiles with stacks of code (or of references).
      FILTERS = %i[focus ignore hide thread hide_gc].freeze
      GC_FRAMES = ["Garbage Collection", "(stack not read: GC running)"].freeze
      OPTIONS = %i[by sort focus ignore hide thread hide_gc notes].freeze

      # A View from a Hash of its options (Profile#report's, Report.for_bytes'),
      # an unknown one named in the error.
      def self.from(options, where)
        return default if options.empty?

        Options.check_unknown!(options, OPTIONS, where)
        new(**options)
      end

      attr_reader :by, :sort, :focus, :ignore, :hide, :thread, :hide_gc, :notes

      # cli: true names the options as the command line does (--by).
      def initialize(by: nil, sort: nil, focus: nil, ignore: nil, hide: nil, thread: nil, hide_gc: false, notes: false,
                     cli: false)
        @cli = cli
        @by = NilClass === by ? nil : Options.one_of(name(:by), by, BY)
        @sort = NilClass === sort ? :flat : Options.one_of(name(:sort), sort, SORTS)
        @focus = pattern(:focus, focus)
        @ignore = pattern(:ignore, ignore)
        @hide = pattern(:hide, hide)
        @thread = thread_name(thread)
        @hide_gc = Options.boolean(name(:hide_gc), hide_gc)
        @notes = Options.boolean(name(:notes), notes)
      end

      def self.default
        @default ||= new
      end

      # The option as the caller wrote it: hide_gc, or --hide-gc.
      def name(option)
        @cli ? "--#{option.to_s.tr("_", "-")}" : option.to_s
      end

      def filtered?
        !(@focus.nil? && @ignore.nil? && @hide.nil? && @thread.nil? && !@hide_gc)
      end

      # The filters given, as the header says them: "--focus csv, --hide-gc".
      def filters_text
        parts = []
        parts << "#{name(:focus)} #{@focus.source}" if @focus
        parts << "#{name(:ignore)} #{@ignore.source}" if @ignore
        parts << "#{name(:hide)} #{@hide.source}" if @hide
        parts << "#{name(:thread)} #{@thread}" if @thread
        parts << name(:hide_gc) if @hide_gc
        parts.join(", ")
      end

      # The rows of a kind of profile: `by` when given, else its default.
      def by_for(kind)
        @by || (kind == :heap ? :site : :function)
      end

      # Raises ArgumentError when an option does not apply to a profile of
      # `kind` (:heap, :cpu, :retention, :gc).
      def check_for!(kind, profile = nil)
        if kind == :gc && (filtered? || @by || @sort != :flat)
          given = [filters_text, (name(:by) if @by), (name(:sort) if @sort != :flat)].reject { |s| s.nil? || s.empty? }
          raise ArgumentError, "fathom: #{given.join(", ")}: a GC profile has no stacks to group or filter (its report " \
                               "is a summary of GC periods)"
        end
        if @by == :class && kind == :cpu
          raise ArgumentError, "fathom: #{name(:by)} class needs a heap or retention profile (CPU and wall samples " \
                               "have no class)"
        end
        if @hide_gc && %i[heap retention].include?(kind)
          raise ArgumentError, "fathom: #{name(:hide_gc)} applies to CPU and wall profiles (a #{kind} profile has no GC samples)"
        end
        if @thread && kind == :retention
          raise ArgumentError, "fathom: #{name(:thread)} applies to heap, CPU and wall profiles (a retention profile " \
                               "is one heap, not threads)"
        end
        check_thread!(profile) if @thread && profile
        self
      end

      # The profile with the filters applied: a Pprof::Profile that shares
      # the original's tables, with fewer samples (focus, ignore, thread,
      # hide_gc) and shorter stacks (hide). The profile itself when there
      # is nothing to filter.
      def apply(profile)
        return profile unless filtered?

        frames = Frames.new(profile)
        matches = {}
        match = lambda do |pattern, id|
          (matches[[pattern.object_id, id]] ||= [frames.location(id).any? { |f| hit?(pattern, f) }]).first
        end
        hidden = {}
        samples = profile.samples.filter_map do |s|
          next if @thread && !thread_of(s).include?(@thread)
          next if @hide_gc && gc_sample?(s, frames)
          next if @focus && s.location_ids.none? { |id| match.call(@focus, id) }
          next if @ignore && s.location_ids.any? { |id| match.call(@ignore, id) }

          ids = s.location_ids
          if @hide || @hide_gc
            ids = ids.reject do |id|
              hidden.fetch(id) do
                hidden[id] = (@hide && match.call(@hide, id)) || (@hide_gc && frames.location(id).all? { |f| GC_FRAMES.include?(f.name) })
              end
            end
          end
          ids.equal?(s.location_ids) ? s : Pprof::Sample.new(ids, s.values, s.labels)
        end
        copy = profile.dup
        copy.samples = samples
        copy
      end

      private

      def pattern(option, value)
        return nil if NilClass === value
        return value if Regexp === value
        raise TypeError, "fathom: #{name(option)} must be a pattern (a String or Regexp), got #{Options.describe(value)}" unless String === value
        raise ArgumentError, "fathom: #{name(option)} must not be empty" if value.empty?

        Regexp.new(value)
      rescue RegexpError => e
        raise ArgumentError, "fathom: #{name(option)} is not a valid regular expression (#{Options.clean(e.message)}), " \
                             "got #{Options.shown(value)}"
      end

      def thread_name(value)
        return nil if NilClass === value
        return value.to_s if Integer === value
        raise TypeError, "fathom: #{name(:thread)} must be a thread's name or id (a String), got #{Options.describe(value)}" unless String === value
        raise ArgumentError, "fathom: #{name(:thread)} must not be empty" if value.empty?

        value
      end

      def hit?(pattern, frame)
        pattern.match?(frame.name) || (!frame.file.empty? && pattern.match?(frame.file))
      end

      # A heap sample's "thread" label; a CPU sample's "thread name" and
      # "thread id".
      def thread_of(sample)
        labels = sample.labels
        [labels["thread"], labels["thread name"], labels["thread id"]].map { |v| Array === v ? v.first.to_s : v }.compact
      end

      def gc_sample?(sample, frames)
        sample.labels["state"] == "gc" ||
          (sample.location_ids.size == 1 && frames.location(sample.location_ids.first).all? { |f| GC_FRAMES.include?(f.name) })
      end

      def check_thread!(profile)
        names = profile.samples.flat_map { |s| thread_of(s) }.uniq
        return if names.include?(@thread)

        shown = names.empty? ? "its samples carry no thread" : "threads: #{names.first(20).map { |n| Options.clean(n, 60) }.join(", ")}"
        raise ArgumentError, "fathom: #{name(:thread)} #{Options.shown(@thread)}: no such thread in this profile (#{shown})"
      end
    end
  end
end
