# frozen_string_literal: true

require_relative "kind"
require_relative "../pprof/reader"
require_relative "../options"
require_relative "../error"

module Fathom
  module Report
    # Profiles of one kind added into one (`fathom merge A B ... -o C`):
    # every worker's heap file of one minute, the CPU files of several
    # runs. Samples keep their stacks and labels; equal (stack, labels)
    # pairs are summed into one sample. Functions and locations are matched
    # by name, file, start line and lines, so files from different
    # processes merge where their code is the same.
    #
    # What the result says about itself: the time from the earliest start
    # to the latest end; the first profile's period and default sample
    # type; the comments every input shares, with the per-file counts that
    # the reports read summed (a heap profile's "Samples:", a CPU profile's
    # dropped samples, a retention profile's "Fathom itself" objects and
    # bytes), the libraries of every input's constants, and one line
    # naming the merge. Comments that describe one file only (a heap
    # census, GC pause percentiles, who wrote it) are left out.
    #
    # Profiles of different kinds (heap and CPU, CPU and wall), or with
    # different sample types, are refused with a Fathom::Error naming the
    # two files: their values do not add up.
    class Merge
      HEAP_SAMPLES = /\ASamples: (\d+) behind alloc_\*, (\d+) behind inuse_\*(.*)\z/m.freeze
      CPU = /\A(fathom\.cpu\.mode=\w+ interval_ns=\d+) dropped=(\d+)(.*)\z/m.freeze
      OWN = /\A(fathom\.retention\.own objects=)(\d+) bytes=(\d+)(.*)\z/m.freeze
      CONSTANTS = "fathom.constants "

      # profiles: [[name, Pprof::Profile], ...] (the name for messages).
      def initialize(profiles)
        raise ArgumentError, "fathom: merge needs two or more profiles, got #{profiles.size}" if profiles.size < 2

        profiles.each { |_, p| Report.check_profile!(p) }
        @profiles = profiles
        check_compatible!
      end

      # The merged Pprof::Profile.
      def profile
        @profile ||= build
      end

      def kind
        @kind ||= Report.kind(@profiles.first.last)
      end

      private

      def check_compatible!
        first_name, first = @profiles.first
        first_kind = kind
        first_mode = cpu_mode(first)
        @profiles.drop(1).each do |name, p|
          k = Report.kind(p)
          if k != first_kind
            raise Fathom::Error, "fathom: cannot merge a #{k} profile (#{name}) into a #{first_kind} profile " \
                                 "(#{first_name}): merge takes profiles of one kind"
          end
          if first_kind == :cpu && cpu_mode(p) != first_mode
            raise Fathom::Error, "fathom: cannot merge a #{cpu_mode(p)} profile (#{name}) with a #{first_mode} " \
                                 "profile (#{first_name}): CPU and wall time do not add up"
          end
          next if p.sample_types.sort == first.sample_types.sort

          raise Fathom::Error, "fathom: #{name} has sample types #{SampleIndex.available(p.sample_types)}, " \
                               "#{first_name} has #{SampleIndex.available(first.sample_types)}: their values do not add up"
        end
      end

      def cpu_mode(profile)
        c = Array(profile.comments).find { |line| line.start_with?("fathom.cpu.mode=") }
        c ? c[/mode=(\w+)/, 1] : profile.default_sample_type
      end

      def build
        first = @profiles.first.last
        types = first.sample_types
        @functions = {}
        @function_keys = {}
        @locations = {}
        @location_keys = {}
        merged = {}
        @profiles.each do |_, p|
          order = types.map { |t| p.sample_types.index(t) }
          location_map = {}
          p.samples.each do |s|
            ids = s.location_ids.map { |id| location_map[id] ||= location(p, id) }
            values = order.map { |i| s.values[i] }
            key = [ids, s.labels]
            if (existing = merged[key])
              values.each_with_index { |v, i| existing.values[i] += v }
            else
              merged[key] = Pprof::Sample.new(ids, values, s.labels)
            end
          end
        end
        starts = @profiles.map { |_, p| p.time_nanos }.reject(&:zero?)
        ends = @profiles.map { |_, p| p.time_nanos + p.duration_nanos }.reject(&:zero?)
        start = starts.min || 0
        Pprof::Profile.new(types, merged.values, @locations, @functions, first.mappings.first(1).to_h, [""],
                           start, starts.empty? ? 0 : ends.max - start, first.period_type, first.period,
                           first.default_sample_type, comments, first.drop_frames, first.keep_frames)
      end

      # A location of profile `p` as a location id of the merged profile.
      def location(p, id)
        lines = p.locations.fetch(id).map { |function_id, line| [function(p, function_id), line] }
        @location_keys[lines] ||= begin
          new_id = @locations.size + 1
          @locations[new_id] = lines
          new_id
        end
      end

      def function(p, id)
        f = p.functions[id] or return 0
        key = [f.name, f.system_name, f.filename, f.start_line]
        @function_keys[key] ||= begin
          new_id = @functions.size + 1
          @functions[new_id] = Pprof::Function.new(new_id, f.name, f.system_name, f.filename, f.start_line)
          new_id
        end
      end

      def comments
        all = @profiles.map { |_, p| Array(p.comments) }
        shared = all.reduce(:&)
        out = []
        first = all.first
        first.each do |c|
          if shared.include?(c) && !c.start_with?(CONSTANTS) then out << c
          elsif (m = HEAP_SAMPLES.match(c)) then out << summed(all, HEAP_SAMPLES) { |a, b| "Samples: #{a} behind alloc_*, #{b} behind inuse_*#{m[3]}" }
          elsif (m = CPU.match(c)) then out << summed_cpu(all, m)
          elsif (m = OWN.match(c)) then out << summed(all, OWN, 2, 3) { |a, b| "#{m[1]}#{a} bytes=#{b}#{m[4]}" }
          end
        end
        out.concat(all.flatten.select { |c| c.start_with?(CONSTANTS) }.uniq)
        out << "fathom merge: #{@profiles.size} profiles added (#{@profiles.map(&:first).first(20).join(", ")}" \
               "#{", …" if @profiles.size > 20})"
        out.compact
      end

      # The sums of two numbers a comment carries in every input; nil (the
      # comment left out) when one input lacks it.
      def summed(all, pattern, a = 1, b = 2)
        matches = all.map { |cs| cs.lazy.map { |c| pattern.match(c) }.find(&:itself) }
        return nil if matches.any?(&:nil?)

        yield matches.sum { |m| m[a].to_i }, matches.sum { |m| m[b].to_i }
      end

      def summed_cpu(all, first)
        matches = all.map { |cs| cs.lazy.map { |c| CPU.match(c) }.find(&:itself) }
        return nil if matches.any? { |m| m.nil? || m[1] != first[1] }

        "#{first[1]} dropped=#{matches.sum { |m| m[2].to_i }}#{first[3]}"
      end
    end
  end
end
