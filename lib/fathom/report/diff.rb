# frozen_string_literal: true

require_relative "units"
require_relative "kind"
require_relative "retention"
require_relative "arguments"
require_relative "../options"
require_relative "../error"

module Fathom
  module Report
    # Growth per path between two profiles of the same kind (`fathom diff`):
    # samples are keyed by their full stack (function names, root first) —
    # for a retention profile that is the reference chain that keeps the
    # objects alive, for a heap profile the allocation stack — and the
    # chosen value is compared. The way to find a leak from two moments:
    # what grew, and through which chain.
    #
    # A retention profile splits one reference chain into frames at its
    # dominators, and which objects dominate others can change between two
    # snapshots without the chain changing (code that ran once may cache a
    # constant's value in an inline cache, a second holder of the hash).
    # So retention samples are keyed by their chain of hops with the class
    # of every object but the last dropped: "A (Module)" | "B → C (Hash)"
    # and "A → B → C (Hash)" are the same chain. The row shows the newest
    # frames.
    #
    #   Growth of inuse_space from before.pb.gz to after.pb.gz: +10.2MB (18.2MB -> 28.4MB)
    #       growth     before      after  objects  path
    #     +10.0MB      1.0MB     11.0MB  +10000   (root: vm) → ... → {…} (Session) → @payload (String)
    class Diff
      Row = Struct.new(:path, :before, :after, :objects_before, :objects_after) do
        def growth
          after - before
        end
      end

      # sample_index: a sample type name (or its position in `before`); nil
      # picks before's default. Profiles of different kinds, or without the
      # default type in both, raise Fathom::Error (the data's fault); a
      # sample_index given that is not in both, ArgumentError.
      def initialize(before, after, sample_index: nil, top: 20)
        Report.check_profile!(before, "before")
        Report.check_profile!(after, "after")
        @top = Options.row_limit("top", top)
        kinds = [Report.kind(before), Report.kind(after)]
        unless kinds.uniq.size == 1
          raise Fathom::Error, "fathom: cannot diff a #{kinds[0]} profile against a #{kinds[1]} profile"
        end

        @index_name = before.sample_types.fetch(SampleIndex.resolve(before, sample_index)).first
        @before_i = before.sample_type_index(@index_name)
        @after_i = after.sample_type_index(@index_name)
        unless @after_i
          raise(NilClass === sample_index ? Fathom::Error : ArgumentError,
                "fathom: sample type #{Options.clean(@index_name).inspect} is not in both profiles " \
                "(before: #{SampleIndex.available(before.sample_types)}; after: #{SampleIndex.available(after.sample_types)})")
        end

        @unit = before.sample_types[@before_i][1]
        @objects_name = %w[inuse_objects alloc_objects].find { |n| before.sample_type_index(n) && after.sample_type_index(n) }
        @chain_keys = Retention.retention_profile?(before) && Retention.retention_profile?(after)
        @rows = {}
        add(before, :before)
        add(after, :after)
      end

      def rows
        @rows.values.reject { |r| r.growth.zero? && r.objects_after == r.objects_before }
             .sort_by { |r| [-r.growth, r.path] }
      end

      def total(side)
        @rows.values.sum { |r| r[side] }
      end

      def to_s
        b = total(:before)
        a = total(:after)
        out = +"Growth of #{@index_name}: #{signed(a - b)} (#{fmt(b)} -> #{fmt(a)})\n"
        shown = rows.select { |r| r.growth.positive? }
        shown = shown.first(@top) if @top
        if shown.empty?
          out << "No path grew.\n"
          return out
        end
        out << format("%10s %10s %10s %8s  %s\n", "growth", "before", "after", "objects", "path")
        shown.each do |r|
          objects = @objects_name ? format("%+d", r.objects_after - r.objects_before) : "-"
          out << format("%10s %10s %10s %8s  %s\n", signed(r.growth), fmt(r.before), fmt(r.after), objects, r.path.join(" → "))
        end
        out
      end

      private

      def add(profile, side)
        i = side == :before ? @before_i : @after_i
        oi = @objects_name && profile.sample_type_index(@objects_name)
        profile.samples.each do |s|
          path = profile.stack_names(s).reverse
          row = @rows[@chain_keys ? chain_key(path) : path] ||= Row.new(path, 0, 0, 0, 0)
          show_path(row, path, s.values[i]) if side == :after
          row[side] += s.values[i]
          row[side == :before ? :objects_before : :objects_after] += s.values[oi] if oi
        end
      end

      # Samples of one chain may be cut into frames differently (one of the
      # 300 sessions also held from a stack has no Hash frame of its own):
      # the row shows the frames of its largest sample in the newer profile.
      def show_path(row, path, value)
        @shown_weight ||= {}.compare_by_identity
        return if @shown_weight.key?(row) && @shown_weight[row] >= value

        @shown_weight[row] = value
        row.path = path
      end

      # A frame is "hop → hop (Class)" (retention_profile.cc); inner frames
      # lose their "(Class)" so that where the chain is cut does not matter.
      FRAME_CLASS = / \([^()]*\)\z/.freeze

      def chain_key(path)
        *inner, leaf = path
        inner.map { |frame| hop_of(frame) }.push(leaf).join(" → ")
      end

      # A frame without its "(Class)", once per frame: every sample under the
      # same frame holds the same String (its function's name).
      def hop_of(frame)
        (@hops ||= {}.compare_by_identity)[frame] ||= frame.sub(FRAME_CLASS, "")
      end

      def fmt(v)
        Units.format_value(v, @unit)
      end

      def signed(v)
        v.negative? ? fmt(v) : "+#{fmt(v)}"
      end
    end
  end
end
