# frozen_string_literal: true

require_relative "units"
require_relative "../options"
require_relative "../error"
require_relative "arguments"
require_relative "../constant_sources"
require_relative "view"

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

      # What --by gem and --by class count for one row.
      Group = Struct.new(:name, :bytes, :objects, :holders)
      # A constant path in a frame's hops: "LeakFixture::Registry::SESSIONS (Hash)".
      CONSTANT_HOP = /\A((?:[A-Z]\w*)(?:::[A-Z]\w*)*)(?: \([^()]*\))?\z/.freeze
      CLASS_OF_FRAME = /\(([^()]*)\)\z/.freeze
      ROOT_FRAME = /\A\(root: ([^)]+)\)/.freeze

      # sample_index is accepted for symmetry and ignored: the rows always
      # rank by retained_space and show self size and objects beside it.
      # by: nil or :function (retainers, the default), :gem (the library
      # whose constant holds each object: ConstantSources), :class. A
      # retention profile has no allocation sites: :site, :line and :file
      # are refused. filters: what View#apply did, said in the header.
      def initialize(profile, top: 20, sample_index: nil, by: nil, filters: nil)
        @top = Options.row_limit("top", top)
        @by = NilClass === by ? :function : Options.one_of("by", by, View::BY)
        if %i[site line file].include?(@by)
          raise ArgumentError, "fathom: by #{@by}: a retention profile says what holds each object, not where it was " \
                               "allocated (for live memory by allocation site, report a heap profile: fathom run " \
                               "--mode heap --exact; its inuse values are what is still alive; --by gem here charges " \
                               "objects to the library whose constant holds them)"
        end
        @filters = filters
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
        out << "Filtered: #{@filters}\n" if @filters
        return out << groups_text if @by != :function

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

      # Rows of --by gem or --by class: [Group], largest first. Each object
      # counts once (its own size: a group's bytes are the bytes its
      # objects hold themselves, so the groups add up to the total).
      def groups
        @groups ||= begin
          table = ConstantSources.parse(@profile.comments) if @by == :gem
          sums = {}
          @profile.samples.each do |s|
            stack = @profile.stack_names(s) # leaf first
            name, holder = @by == :gem ? gem_of(stack, table) : [class_of(stack), nil]
            g = sums[name] ||= Group.new(name, 0, 0, Hash.new(0))
            g.bytes += s.values[@space_i]
            g.objects += s.values[@objects_i]
            g.holders[holder] += s.values[@space_i] if holder
          end
          sums.values.sort_by { |g| [-g.bytes, g.name] }
        end
      end

      private

      def groups_text
        out = +""
        if @by == :gem
          out << "By gem: each object charged to the library that defines the deepest constant on its reference chain\n"
          if ConstantSources.parse(@profile.comments).empty?
            out << "(this profile does not say which library defines each constant — a snapshot from an older Fathom " \
                   "or a heap dump — so objects are grouped by their constant's top-level name)\n"
          end
        else
          out << "By class of the retained object\n"
        end
        all = groups
        shown = @top ? all.first(@top) : all
        out << format("%10s %6s %8s  %s\n", "bytes", "bytes%", "objects", @by == :gem ? "gem (largest holders)" : "class")
        total = total_space
        shown.each do |g|
          holders = g.holders.sort_by { |h, b| [-b, h] }.first(2).map(&:first)
          out << format("%10s %s %8d  %s%s\n", Units.format_value(g.bytes, "bytes"), Units.percentage(g.bytes, total),
                        g.objects, g.name, holders.empty? ? "" : " (#{holders.join(", ")})")
        end
        out << "Showing #{shown.size} of #{all.size} rows\n" if shown.size < all.size
        out
      end

      def class_of(stack)
        return stack.first if stack.first == @internals_name

        stack.first.to_s[CLASS_OF_FRAME, 1] || "<none>"
      end

      # [library, holding constant] of an object from its stack (leaf
      # first): the deepest constant on the chain, its library from the
      # profile's table. Objects no constant holds are grouped by how they
      # are held: Ruby's internals, a thread's stack, a global, the VM.
      def gem_of(stack, table)
        return [stack.first, nil] if stack.first == @internals_name

        stack.each do |frame|
          frame.split(" → ").reverse_each do |hop|
            m = CONSTANT_HOP.match(hop) or next
            const = m[1]
            next if ConstantSources::ROOTS.include?(const)

            gem = table.empty? ? const.split("::").first : ConstantSources.lookup(table, const)
            return [gem || ConstantSources::CORE, const]
          end
        end
        root = stack.last.to_s[ROOT_FRAME, 1]
        held = stack.reverse.any? { |f| f.include?("thread ") || f.include?("via Thread") || f.include?("via Fiber") }
        [held ? "(no constant: a thread's stack or locals)" : "(no constant: #{root || "held otherwise"})", nil]
      end

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
