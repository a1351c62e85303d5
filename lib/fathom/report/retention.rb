# frozen_string_literal: true

require_relative "units"
require_relative "../options"
require_relative "../error"
require_relative "arguments"

module Fathom
  module Report
    # The text report of a retention profile (Fathom.retention_snapshot):
    # the objects that retain the most memory, each with the reference chain
    # from the GC roots that keeps it alive.
    #
    #   Retention profile: 120034 objects, 18.2MB reachable
    #   Top 20 retainers by retained size
    #     retained      self  objects  retainer
    #     10.45MB    1.02kB        1  Registry::SESSIONS (Hash)
    #        (root: vm) → Object (Class) → Registry (Class) → Registry::SESSIONS (Hash)
    #
    # Each object is one sample whose stack is its dominator path (root
    # category first), so a row is a frame name aggregated over the objects
    # it names: "retained" sums their retained_space, which the encoder
    # charges only to the outermost object of a name on each dominator path
    # (core/retention/retention_profile.h), so it is the retained size of all
    # the row's objects together and never exceeds the heap, even for a name
    # that recurs down a linked list; "self" sums their own sizes. The path
    # shown is that of the row's largest object.
    #
    # Two things are not in the table: the Ruby internals' row (compiled
    # code, method caches: in the totals, printed on its own line below the
    # table) and Fathom's own objects (not in the profile's samples at all,
    # counted by its "fathom.retention.own" comment: printed last). See
    # docs/internals/retention.md, "Fathom's own objects and Ruby internals".
    class Retention
      Row = Struct.new(:name, :retained, :self_size, :objects, :path, :path_retained)
      # What the snapshot writes (ruby/retention/retention_snapshot.cc).
      OWN_COMMENT = /\Afathom\.retention\.own objects=(\d+) bytes=(\d+)/.freeze
      INTERNALS_COMMENT = /\Afathom\.retention\.internals: "([^"]+)"/.freeze
      INTERNALS_ROW = "Ruby internals: compiled code, method caches"

      def self.retention_profile?(profile)
        profile.sample_type_names.include?("retained_space")
      end

      # sample_index is accepted for symmetry and ignored: the rows always
      # rank by retained_space and show self size and objects beside it.
      def initialize(profile, top: 20, sample_index: nil)
        @top = Options.row_limit("top", top)
        Report.check_profile!(profile)
        raise Fathom::Error, "fathom: not a retention profile (no retained_space sample type)" unless self.class.retention_profile?(profile)

        @profile = profile
        @sample_index = sample_index
        @retained_i = profile.sample_type_index("retained_space")
        @space_i = profile.sample_type_index("inuse_space")
        @objects_i = profile.sample_type_index("inuse_objects")
        unless @space_i && @objects_i
          raise Fathom::Error, "fathom: not a usable retention profile: it has retained_space but not " \
                               "inuse_space and inuse_objects"
        end
        @internals_name = internals_name
        all = build_rows
        @internals = all.find { |r| r.name == @internals_name }
        @rows = all - [@internals]
      end

      # The program's retainers (the Ruby internals' row left out), and the
      # internals' row (nil when the profile has none).
      attr_reader :rows, :internals

      # [objects, bytes] of Fathom's own objects, left out of the profile;
      # nil for a profile without the comment (older Fathom, heap dumps).
      def own
        line = Array(@profile.comments).find { |c| c.match?(OWN_COMMENT) } or return nil
        m = OWN_COMMENT.match(line)
        [Integer(m[1]), Integer(m[2])]
      end

      def total_objects
        @profile.samples.sum { |s| s.values[@objects_i] }
      end

      def total_space
        @profile.samples.sum { |s| s.values[@space_i] }
      end

      def to_s
        out = +"Retention profile: #{total_objects} objects, #{Units.format_value(total_space, "bytes")} reachable\n"
        shown = @top ? @rows.first(@top) : @rows
        out << "Top #{shown.size} retainers by retained size (each object charged once, on its dominator path)\n"
        out << format("%10s %10s %8s  %s\n", "retained", "self", "objects", "retainer")
        shown.each do |r|
          out << format("%10s %10s %8d  %s\n", Units.format_value(r.retained, "bytes"),
                        Units.format_value(r.self_size, "bytes"), r.objects, r.name)
          # The row's own frame may already carry the whole hop path.
          out << "             #{r.path.join(" → ")}\n" if r.path.size > 1
        end
        if @internals
          out << "Ruby's own objects, one row of their own (in the totals, not in the table):\n"
          out << format("%10s %10s %8d  %s\n", Units.format_value(@internals.retained, "bytes"),
                        Units.format_value(@internals.self_size, "bytes"), @internals.objects, @internals.name)
        end
        if (objects, bytes = own)
          out << "Fathom itself, not charged (not in the totals):\n"
          out << format("%10s %10s %8d  %s\n", "", Units.format_value(bytes, "bytes"), objects,
                        "Fathom itself: its module, profilers, collectors, threads and what only they hold")
        end
        out
      end

      private

      def internals_name
        line = Array(@profile.comments).find { |c| c.match?(INTERNALS_COMMENT) }
        line ? INTERNALS_COMMENT.match(line)[1] : INTERNALS_ROW
      end

      def build_rows
        rows = {}
        @profile.samples.each do |s|
          stack = @profile.stack_names(s) # leaf first
          name = stack.first or next
          row = rows[name] ||= Row.new(name, 0, 0, 0, nil, -1)
          retained = s.values[@retained_i]
          row.retained += retained
          row.self_size += s.values[@space_i]
          row.objects += s.values[@objects_i]
          if retained > row.path_retained
            row.path_retained = retained
            row.path = stack.reverse
          end
        end
        rows.values.sort_by { |r| [-r.retained, r.name] }
      end
    end
  end
end
