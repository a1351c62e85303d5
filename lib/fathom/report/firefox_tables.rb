# frozen_string_literal: true

require_relative "../error"
require_relative "firefox_fields"
require_relative "../options"
require_relative "../pprof/reader"

module Fathom
  module Report
    # The samples and allocations of a Fathom Firefox Profiler file as
    # decoded pprof profiles (Pprof::Profile), so that the one `pprof -top`
    # table (Top) prints their top functions: no second table code.
    #
    #   FirefoxTables.cpu(json)         samples of the CPU/wall tracks
    #   FirefoxTables.allocations(json) the tracks' jsAllocations
    #
    # Functions are keyed by name across tracks (each track has its own
    # tables; Top groups rows by name anyway). Each function is one location
    # (the file's frames have no inlining), so a stack becomes the
    # location ids of its frames, leaf first, as in pprof.
    #
    # The "Garbage Collection" track is left out of both: beside CPU tracks
    # its GC time is the same time the threads' GC-category samples hold
    # (docs/internals/timeline.md, "GC counted once"), and it has no allocations.
    #
    # The JSON is a file from anywhere: anything of the wrong shape (a
    # stack index out of range, a prefix that is not an earlier stack, a
    # weight that is not a number) raises Fathom::Error.
    module FirefoxTables
      GC_TRACK = "Garbage Collection"
      # The leaf frame the writer adds to each allocation's stack: "new
      # String" (core/timeline/firefox_combined.h AllocatedClassFrameName).
      CLASS_FRAME = "new "

      # What the CPU table's values are, said in its header.
      CPU_WEIGHTS = "threadCPUDelta (CPU time since the thread's previous sample)"
      WALL_WEIGHTS = "sample weights (wall time since the thread's previous sample)"
      COUNT_WEIGHTS = "sample counts (the file has no CPU or wall time per sample)"

      extend FirefoxFields

      module_function

      # The GC profiler's track: tid 0 and its name (CPU tracks carry native
      # thread ids, the heap-only "ruby" track the pid).
      def gc_track?(thread)
        Hash === thread && thread["name"] == GC_TRACK && thread["tid"].to_s == "0"
      end

      # Pprof::Profile of the CPU/wall tracks' samples: sample types
      # samples (count), cpu (threadCPUDelta, ns) and, in a wall profile,
      # wall (weights, ms -> ns); the default is the profile's mode. A
      # sample's count is 1 when it has weight: the CPU writer's weightless
      # rows mark where a long stretch began (core/cpu/cpu_firefox.cc) and
      # stand for no time, as in the threads table. nil without samples.
      def cpu(json, mode:)
        builder = Builder.new
        wall = mode == "wall"
        has_cpu = has_weight = false
        raw = []
        tracks(json).each do |t|
          next if gc_track?(t)

          samples = object(t["samples"], "samples")
          stacks = array(samples["stack"], "samples.stack")
          weights = samples["weight"].nil? ? nil : array(samples["weight"], "samples.weight")
          deltas = samples["threadCPUDelta"].nil? ? nil : array(samples["threadCPUDelta"], "samples.threadCPUDelta")
          weighted_ms = weights && samples["weightType"] == "tracing-ms"
          has_cpu ||= !deltas.nil?
          has_weight ||= weighted_ms
          frames = builder.track(t)
          stacks.each_with_index do |stack, i|
            next if stack.nil?

            weight = weights ? number(weights[i], "samples.weight") : 1
            next unless weight.positive?

            cpu_ns = deltas ? number(deltas[i], "samples.threadCPUDelta").round : 0
            wall_ns = weighted_ms ? (weight * 1_000_000).round : 0
            raw << [frames.call(stack), 1, cpu_ns, wall_ns]
          end
        end
        return nil if raw.empty?

        if wall && has_weight
          types = [%w[samples count], %w[cpu nanoseconds], %w[wall nanoseconds]]
          default = "wall"
          how = WALL_WEIGHTS
        elsif has_cpu
          types = [%w[samples count], %w[cpu nanoseconds]]
          default = "cpu"
          how = CPU_WEIGHTS
        else
          types = [%w[samples count]]
          default = "samples"
          how = COUNT_WEIGHTS
        end
        samples = raw.map do |ids, *values|
          Pprof::Sample.new(ids, values.first(types.size), {})
        end
        comments = ["Top functions by #{default}: #{how}, #{raw.size} samples",
                    "(weightless filler rows and the #{GC_TRACK} track, a view of GC time counted here, left out)"]
        builder.profile(types, samples, default, comments)
      end

      # Pprof::Profile of the tracks' sampled allocations (jsAllocations):
      # alloc_samples (one per row: a sampled allocation) and alloc_space
      # (its weight: the bytes of the allocations it stands for), labelled
      # with its class for Top's "By class" summary. nil without any.
      def allocations(json)
        builder = Builder.new
        samples = []
        tracks(json).each do |t|
          next if gc_track?(t) || t["jsAllocations"].nil?

          allocs = object(t["jsAllocations"], "jsAllocations")
          stacks = array(allocs["stack"], "jsAllocations.stack")
          weights = array(allocs["weight"], "jsAllocations.weight")
          classes = allocs["className"].nil? ? [] : array(allocs["className"], "jsAllocations.className")
          frames = builder.track(t)
          stacks.each_with_index do |stack, i|
            bytes = number(weights[i], "jsAllocations.weight").round
            ids = stack.nil? ? [] : frames.call(stack)
            # The writer ends each stack in a frame naming the class (the
            # profiler shows className nowhere else); the class is a label
            # here, so the leaf is the allocating function again.
            ids = ids.drop(1) if !ids.empty? && builder.name(ids.first) == "#{CLASS_FRAME}#{classes[i]}"
            samples << Pprof::Sample.new(ids, [1, bytes], { "class" => classes[i].to_s })
          end
        end
        return nil if samples.empty?

        comment = "Top allocating functions: #{samples.size} sampled allocations (jsAllocations), each weighted " \
                  "by the bytes it stands for"
        builder.profile([%w[alloc_samples count], %w[alloc_space bytes]], samples, "alloc_space", [comment])
      end

      def tracks(json)
        threads = json["threads"]
        raise Fathom::Error, "fathom: not a Firefox Profiler profile (no threads)" unless Array === threads

        threads.each { |t| object(t, "threads[]") }
      end


      # Interns frames across tracks — function name, file and line, so
      # that the reports can group by site, line, file and gem as for pprof
      # — and turns each track's stack indices into location ids (leaf
      # first). A function is its name and file; a location adds the line.
      class Builder
        def initialize
          @location_ids = {}
          @locations = []
        end

        # The function name of a location id.
        def name(id)
          @locations[id - 1][0]
        end

        # A lambda: stack index of this track => location ids, leaf first
        # (memoized per stack; a stack's prefix must be an earlier stack, as
        # the format requires, so the walk always ends).
        def track(thread)
          strings = FirefoxTables.array(thread["stringArray"], "stringArray")
          stack_table = FirefoxTables.object(thread["stackTable"], "stackTable")
          prefixes = FirefoxTables.array(stack_table["prefix"], "stackTable.prefix")
          stack_frames = FirefoxTables.array(stack_table["frame"], "stackTable.frame")
          frame_table = FirefoxTables.object(thread["frameTable"], "frameTable")
          frame_funcs = FirefoxTables.array(frame_table["func"], "frameTable.func")
          frame_lines = frame_table["line"].nil? ? [] : FirefoxTables.array(frame_table["line"], "frameTable.line")
          func_table = FirefoxTables.object(thread["funcTable"], "funcTable")
          func_names = FirefoxTables.array(func_table["name"], "funcTable.name")
          func_files = func_table["fileName"].nil? ? [] : FirefoxTables.array(func_table["fileName"], "funcTable.fileName")
          memo = {}
          location_of = lambda do |stack|
            frame = entry(stack_frames, stack, "stackTable.frame")
            func = entry(frame_funcs, frame, "frameTable.func")
            name = strings[entry(func_names, func, "funcTable.name")]
            raise Fathom::Error, "fathom: not a Firefox Profiler profile (a function name is not a string)" unless String === name

            file_index = func_files[func]
            file = Integer === file_index ? strings[file_index] : nil
            file = "" unless String === file
            line = frame_lines[frame]
            line = 0 unless Integer === line && line >= 0
            key = [name, file, line]
            @location_ids[key] ||= (@locations << key).size
          end
          lambda do |stack|
            memo[stack] ||= begin
              ids = []
              at = stack
              until at.nil?
                check_index(stack_frames, at, "samples.stack")
                ids << location_of.call(at)
                prefix = prefixes[at]
                unless prefix.nil? || (Integer === prefix && prefix < at)
                  raise Fathom::Error, "fathom: not a Firefox Profiler profile (stack #{at}'s prefix is not an earlier stack)"
                end

                at = prefix
              end
              ids
            end
          end
        end

        def profile(types, samples, default, comments)
          functions = {}
          function_ids = {}
          locations = {}
          @locations.each_with_index do |(name, file, line), i|
            fid = function_ids[[name, file]] ||= begin
              id = function_ids.size + 1
              functions[id] = Pprof::Function.new(id, name, name, file, 0)
              id
            end
            locations[i + 1] = [[fid, line]]
          end
          Pprof::Profile.new(types, samples, locations, functions, {}, [""], 0, 0, nil, 0, default, comments, nil, nil)
        end

        private

        # i, when it is an index into table, else Fathom::Error.
        def check_index(table, i, what)
          return i if Integer === i && i >= 0 && i < table.size

          raise Fathom::Error, "fathom: not a Firefox Profiler profile (#{what}: index #{Options.clean(i.inspect, 40)} " \
                               "out of range)"
        end

        # table[i] for an index i in range.
        def entry(table, i, what)
          table[check_index(table, i, what)]
        end
      end
    end
  end
end
