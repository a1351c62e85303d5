# frozen_string_literal: true

require_relative "top"
require_relative "firefox_tables"
require_relative "firefox_summary"
require_relative "units"
require_relative "view"
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

      # Never a GC profile's types: those have gc_steps (hooks) or gcs
      # (both sources; the counters file has cpu and gcs only).
      def self.cpu_profile?(profile)
        names = profile.sample_type_names
        %w[samples cpu wall].all? { |n| names.include?(n) } && !names.include?("gc_steps") && !names.include?("gcs")
      end

      # by, sort, notes, filters: Top's (the functions table).
      def initialize(profile, sample_index: nil, top: 20, by: :function, sort: :flat, notes: false, filters: nil)
        Report.check_profile!(profile)
        raise Fathom::Error, "fathom: not a CPU profile (no samples, cpu and wall sample types)" unless self.class.cpu_profile?(profile)

        @profile = profile
        @top = Top.new(profile, sample_index: sample_index, top: top, by: by, sort: sort, notes: notes, filters: filters)
      end

      attr_reader :top

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
    # file (alone, or combined with GC and heap): the top functions of the
    # samples, the top allocating functions of the allocations
    # (jsAllocations), both by the `pprof -top` table (Top, through
    # FirefoxTables), then per thread (track) the summed sample weights (CPU
    # or wall ms) by state category with a total, then the GC markers'
    # summary. The timeline itself is for profiler.firefox.com.
    #
    # GC counted once: the threads' GC column holds the samples taken while
    # GC stopped each thread; the "Garbage Collection" track shows the same
    # time as the GC profiler measured it. The total adds the threads only,
    # and the GC track's row comes after it, marked as a view
    # (docs/internals/timeline.md, "GC counted once").
    class CpuFirefoxSummary
      # "Fathom cpu profile", or a combined file: "Fathom cpu+gc+heap profile".
      PRODUCT = /\AFathom (cpu|wall)(?:\+[a-z]+)* profile/

      def self.cpu_firefox?(json)
        Hash === json && Hash === json["meta"] && PRODUCT.match?(json["meta"]["product"].to_s)
      end

      # sample_index picks the functions table's measure (samples, cpu, or
      # wall in a wall profile); top, its rows and the allocations table's.
      # view: the rows and filters of the two tables (View); the threads
      # table is the file's tracks as they are.
      def initialize(json, sample_index: nil, top: 20, view: View.default)
        raise Fathom::Error, "fathom: not a Fathom CPU/wall Firefox profile" unless self.class.cpu_firefox?(json)

        @json = json
        @mode = json["meta"]["product"][PRODUCT, 1]
        @categories = Array(json["meta"]["categories"]).map { |c| Hash === c ? c["name"].to_s : "" }
        view.check_for!(:cpu)
        cpu = FirefoxTables.cpu(json, mode: @mode)
        # Built now, so that a wrong sample_index is refused before printing.
        @functions = cpu && table(view, cpu, :cpu, sample_index: sample_index, top: top)
        allocations = FirefoxTables.allocations(json)
        @allocations = allocations && table(view, allocations, :heap, top: top)
        gc = FirefoxTables.tracks(json).find { |t| FirefoxTables.gc_track?(t) }
        @gc = gc && FirefoxSummary.new(json)
      end

      def to_s
        kinds = @json["meta"]["product"][/\AFathom ([a-z+]+) profile/, 1]
        out = +"#{kinds} profile (Firefox Profiler JSON; open it at https://profiler.firefox.com)\n"
        out << "\n" << @functions.to_s if @functions
        out << "\n" << @allocations.to_s if @allocations
        out << "\n" << threads_table
        if @gc
          out << "\nGC (the #{FirefoxTables::GC_TRACK} track's markers):\n"
          @gc.to_s.lines.drop(1).each { |line| out << "  " << line }
        end
        out
      end

      private

      def table(view, profile, kind, **opts)
        view.check_for!(kind, profile) if kind == :cpu
        filtered = view.apply(profile)
        filters = view.filtered? ? "#{Report.filters_text(view, profile, filtered)}; the threads table below is unfiltered" : nil
        Top.new(filtered, by: view.by_for(kind), sort: view.sort, notes: view.notes, filters: filters, **opts)
      end

      # One row per track: samples and summed weights by category (only the
      # categories some track has time in), then, in a combined file, the
      # heap samples on that track (jsAllocations: count and bytes, each a
      # sampled allocation standing for the allocations of its period) and
      # its marker count (GC periods on the GC track). A total of the
      # threads' rows, then the GC track's row, which the total leaves out.
      def threads_table
        tracks = FirefoxTables.tracks(@json)
        gc_track = tracks.find { |t| FirefoxTables.gc_track?(t) }
        rows = tracks.reject { |t| t.equal?(gc_track) }.map { |t| row(t) }
        gc_row = gc_track && gc_row(gc_track)
        all = rows + [gc_row].compact
        names = @categories.drop(1).select { |n| all.any? { |r| r[:sums][n].positive? } }
        allocs = all.any? { |r| r[:allocs] }
        width = [all.map { |r| r[:name].size }.max.to_i, "total (00 tracks)".size, 20].max
        out = +"Threads (#{@mode} profile: each track's #{@mode} time by category):\n"
        head = format("  %-#{width}s %8s", "thread", "samples") + names.map { |n| format(" %18s", n) }.join
        head << format(" %12s %12s", "heap samples", "heap bytes") if allocs
        out << head << format(" %8s\n", "markers")
        line = lambda do |r|
          text = format("  %-#{width}s %8d", r[:name], r[:samples])
          text << names.map { |n| format(" %18s", Units.format_value((r[:sums][n] * 1e6).round, "nanoseconds")) }.join
          text << format(" %12d %12s", r[:allocs].to_i, Units.format_value(r[:alloc_bytes].to_i, "bytes")) if allocs
          out << text << format(" %8d\n", r[:markers])
        end
        rows.each(&line)
        if rows.size > 1
          total = { name: "total (#{rows.size} tracks)", samples: rows.sum { |r| r[:samples] },
                    sums: Hash.new(0.0), allocs: rows.sum { |r| r[:allocs].to_i },
                    alloc_bytes: rows.sum { |r| r[:alloc_bytes].to_i }, markers: rows.sum { |r| r[:markers] } }
          rows.each { |r| r[:sums].each { |n, v| total[:sums][n] += v } }
          line.call(total)
        end
        if gc_row
          line.call(gc_row)
          measure = @gc.counters? ? "CPU time in GC, from GC.stat(:time)" : "wall time in GC"
          out << "  (#{FirefoxTables::GC_TRACK}: the GC time of the threads above, as the GC profiler measured it " \
                 "(#{measure}); a view of the same time, not in the total)\n"
        end
        out
      end

      def row(thread)
        samples = FirefoxTables.object(thread["samples"], "samples")
        stacks = FirefoxTables.array(samples["stack"], "samples.stack")
        weights = samples["weight"] ? FirefoxTables.array(samples["weight"], "samples.weight") : Array.new(stacks.size, 1)
        cats = FirefoxTables.array(FirefoxTables.object(thread["stackTable"], "stackTable")["category"],
                                   "stackTable.category")
        sums = Hash.new(0.0)
        stacks.each_with_index do |st, i|
          next if st.nil?

          category = Integer === st ? cats[st] : nil
          name = (Integer === category && @categories[category]) || "Other"
          sums[name] += FirefoxTables.number(weights[i], "samples.weight").to_f
        end
        allocations = thread["jsAllocations"] && FirefoxTables.object(thread["jsAllocations"], "jsAllocations")
        # Weightless rows are not samples: the CPU writer adds them to mark
        # where a long stretch began (core/cpu/cpu_firefox.cc).
        count = samples["weight"] ? weights.count { |w| FirefoxTables.number(w, "samples.weight").positive? } : stacks.size
        { name: thread["name"].to_s, samples: count, sums: sums,
          allocs: allocations && allocations["length"].to_i,
          alloc_bytes: allocations && FirefoxTables.array(allocations["weight"], "jsAllocations.weight")
                                                   .sum { |w| FirefoxTables.number(w, "jsAllocations.weight").to_i },
          markers: FirefoxTables.object(thread["markers"], "markers")["length"].to_i }
      end

      # The GC track's own measure, from its markers: the summed time in GC
      # (its samples are weighted by the same time; files of one earlier
      # version wrote them with weight 0, which this reads the same).
      def gc_row(thread)
        r = row(thread)
        r[:name] = "#{FirefoxTables::GC_TRACK} (view)"
        r[:sums] = Hash.new(0.0).merge!("GC" => @gc.gc_ms.to_f)
        r
      end
    end
  end
end
