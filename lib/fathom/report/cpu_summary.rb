# frozen_string_literal: true

require_relative "top"
require_relative "units"
require_relative "../options"

module Fathom
  module Report
    # The report of a CPU or wall profile (CpuProfiler): the top functions,
    # flat and cumulative (the `pprof -top` table, on cpu or wall), then one
    # row per thread with its CPU time and its wall time split by state:
    #
    #   Threads (wall profile; cpu time, and wall time by state):
    #     thread            id       cpu   running  gvl-wait   blocked      gc  samples
    #     main           12345   1.20s     1.30s     0.10s     0.50s   20ms      190
    #
    # In a :cpu profile a thread is sampled only while it uses CPU: the state
    # columns split its CPU time (running or in GC); in a :wall profile every
    # thread is sampled all the time and the states split its wall time,
    # which adds up to the time it was alive. "gvl-wait" needs Ruby 3.2+ (the GVL events); on 3.1 that
    # time shows as running (see the profile's "states=" comment).
    class CpuSummary
      STATES = %w[running gvl-wait blocked gc].freeze

      def self.cpu_profile?(profile)
        names = profile.sample_type_names
        %w[samples cpu wall].all? { |n| names.include?(n) } && !names.include?("gc_steps")
      end

      def initialize(profile, sample_index: nil, top: 20)
        Report.check_profile!(profile)
        raise Fathom::Error, "fathom: not a CPU profile (no samples, cpu and wall sample types)" unless self.class.cpu_profile?(profile)

        @profile = profile
        @top = Top.new(profile, sample_index: sample_index, top: top)
      end

      # {thread label => {name:, id:, cpu:, samples:, "running" => ns, ...}}
      def threads
        @threads ||= begin
          cpu = @profile.sample_type_index("cpu")
          # States split the profile's own measure: cpu time in a :cpu
          # profile (sampled only while on CPU), wall time in a :wall one.
          by = @profile.sample_type_index(mode == "wall" ? "wall" : "cpu")
          count = @profile.sample_type_index("samples")
          rows = {}
          @profile.samples.each do |s|
            id = s.labels["thread id"]
            id = id.first if Array === id
            name = s.labels["thread name"].to_s
            row = rows[[id, name]] ||= Hash.new(0).merge!(name: name, id: id)
            row[:cpu] += s.values[cpu]
            row[:samples] += s.values[count]
            row[s.labels["state"].to_s] += s.values[by]
          end
          rows.values.sort_by { |r| [-r[:cpu], -STATES.sum { |st| r[st] }, r[:id].to_i] }
        end
      end

      def mode
        comment = Array(@profile.comments).find { |c| c.start_with?("fathom.cpu.mode=") }
        comment ? comment[/mode=(\w+)/, 1] : @profile.default_sample_type
      end

      def to_s
        out = +@top.to_s
        out << "\nThreads (#{mode} profile; cpu time, and #{mode} time by state):\n"
        width = [threads.map { |r| r[:name].size }.max.to_i, 6].max
        out << format("  %-#{width}s %8s %10s %10s %10s %10s %10s %8s\n", "thread", "id", "cpu", *STATES, "samples")
        threads.each do |r|
          out << format("  %-#{width}s %8s %10s %10s %10s %10s %10s %8d\n", r[:name], r[:id], t(r[:cpu]),
                        *STATES.map { |st| t(r[st]) }, r[:samples])
        end
        states = Array(@profile.comments).find { |c| c.include?("states=gvl-flag") }
        out << "  (Ruby < 3.2: no GVL events, GVL waits are counted as running)\n" if states
        out
      end

      private

      def t(ns)
        Units.format_value(ns, "nanoseconds")
      end
    end
  
    # `fathom report` of a CPU/wall profile written as a Firefox Profiler
    # file: per thread (track), the summed sample weights (CPU or wall ms)
    # by state category. The timeline itself is for profiler.firefox.com.
    class CpuFirefoxSummary
      # "Fathom cpu profile", or a combined file: "Fathom cpu+gc+heap profile".
      PRODUCT = /\AFathom (cpu|wall)(?:\+[a-z]+)* profile/

      def self.cpu_firefox?(json)
        Hash === json && Hash === json["meta"] && PRODUCT.match?(json["meta"]["product"].to_s)
      end

      def initialize(json)
        raise Fathom::Error, "fathom: not a Fathom CPU/wall Firefox profile" unless self.class.cpu_firefox?(json)

        @json = json
        @categories = Array(json["meta"]["categories"]).map { |c| c["name"].to_s }
      end

      # One row per track: samples and summed weights by category (only the
      # categories some track has time in), then, in a combined file, the
      # heap samples on that track (jsAllocations: count and bytes, each a
      # sampled allocation standing for the allocations of its period) and
      # its marker count (GC periods on the GC track).
      def to_s
        rows = Array(@json["threads"]).map { |t| row(t) }
        names = @categories.drop(1).select { |n| rows.any? { |r| r[:sums][n].positive? } }
        allocs = rows.any? { |r| r[:allocs] }
        kinds = @json["meta"]["product"][/\AFathom ([a-z+]+) profile/, 1]
        out = +"#{kinds} profile (Firefox Profiler JSON; open it at https://profiler.firefox.com)\n"
        head = format("  %-20s %8s", "thread", "samples") + names.map { |n| format(" %18s", n) }.join
        head << format(" %12s %12s", "heap samples", "heap bytes") if allocs
        out << head << format(" %8s\n", "markers")
        rows.each do |r|
          line = format("  %-20s %8d", r[:name], r[:samples])
          line << names.map { |n| format(" %18s", Units.format_value((r[:sums][n] * 1e6).round, "nanoseconds")) }.join
          line << format(" %12d %12s", r[:allocs].to_i, Units.format_value(r[:alloc_bytes].to_i, "bytes")) if allocs
          out << line << format(" %8d\n", r[:markers])
        end
        out
      end

      private

      def row(thread)
        samples = thread["samples"] || {}
        stacks = samples["stack"] || []
        weights = samples["weight"] || Array.new(stacks.size, 1)
        cats = thread.dig("stackTable", "category") || []
        sums = Hash.new(0.0)
        stacks.each_with_index { |st, i| sums[@categories[cats[st]] || "Other"] += weights[i].to_f unless st.nil? }
        allocations = thread["jsAllocations"]
        # Weightless rows are not samples: the CPU writer adds them to mark
        # where a long stretch began (core/cpu/cpu_firefox.cc).
        count = samples["weight"] ? weights.count { |w| w.to_f.positive? } : stacks.size
        { name: thread["name"].to_s, samples: count, sums: sums,
          allocs: allocations && allocations["length"].to_i,
          alloc_bytes: allocations && Array(allocations["weight"]).sum(&:to_i),
          markers: thread.dig("markers", "length").to_i }
      end
    end
  end
end
