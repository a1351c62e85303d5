# frozen_string_literal: true

# A structural check of a Firefox Profiler *processed* profile, version 48 —
# the version ext/fathom/core/firefox/firefox_profile.h writes — on the Hash that
# JSON.parse returns. Stdlib only.
#
#   hash = JSON.parse(path.end_with?(".gz") ? Zlib.gunzip(File.binread(path)) : File.read(path))
#   FirefoxFormat.check!(hash)   # raises FirefoxFormat::Invalid, or returns true
#
# It checks what the profiler relies on when it loads and upgrades such a
# file: meta (version numbers, interval, startTime, product, categories with a
# grey default one, markerSchema in v48's vocabulary, thread lists pointing at
# real threads); per thread, its scalar fields and tables, each with an
# integer `length` equal to every column's length; every index in range
# (samples -> stacks, stack prefix < own index, stack -> frame, frame -> func,
# names -> stringArray, categories/subcategories -> meta.categories); samples
# in time order; marker phases with the times they need; marker data typed by
# a schema, with values of the kind its fields' formats say, and the keys the
# profiler reads whatever the schema (cause, innerWindowID, stack) in the shape
# it expects.
#
# ext/fathom/core/testing/firefox_format_check.h is the same check in C++ (the
# core's tests run this file too, to keep the two in step). The error message
# lists every problem found (up to 50), each as "path: what", e.g.
# "threads[1].stackTable.prefix[3]: 7 is not < 3 (its own index)".
module FirefoxFormat
  class Invalid < StandardError; end

  VERSION = 48
  MAX_ERRORS = 50

  COLORS = %w[transparent purple green orange yellow lightblue blue brown magenta
              red lightred darkgrey darkgray grey gray].freeze
  DISPLAY_LOCATIONS = %w[marker-chart marker-table timeline-overview timeline-memory
                         timeline-ipc timeline-fileio stack-chart].freeze
  STRING_FORMATS = %w[string url file-path].freeze
  NUMBER_FORMATS = %w[duration time seconds milliseconds microseconds nanoseconds
                      bytes percentage integer decimal].freeze
  WEIGHT_TYPES = %w[samples tracing-ms bytes].freeze
  # v48's ThreadCPUDeltaUnit.
  CPU_DELTA_UNITS = ["ns", "\u00b5s", "variable CPU cycles"].freeze

  # The name of a frame's function in thread `t` (a parsed thread Hash).
  def self.func_name(t, frame)
    t["stringArray"][t["funcTable"]["name"][t["frameTable"]["func"][frame]]]
  end

  # The function names of stack index `stack` in thread `t`, leaf first.
  def self.stack_names(t, stack)
    names = []
    while stack
      names << func_name(t, t["stackTable"]["frame"][stack])
      stack = t["stackTable"]["prefix"][stack]
    end
    names
  end

  def self.check!(profile)
    errors = Checker.new.check(profile)
    raise Invalid, "not a valid Firefox processed profile (v#{VERSION}):\n#{errors.join("\n")}" unless errors.empty?

    true
  end

  # The problems found, as "path: what" strings (empty when valid).
  def self.errors(profile)
    Checker.new.check(profile)
  end

  class Checker
    def initialize
      @errors = []
      @categories = [] # subcategory counts
      @schemas = {}    # name => [[key, format], ...]
    end

    def check(profile)
      unless profile.is_a?(Hash)
        error("(profile)", "must be an object")
        return @errors
      end
      meta = object(profile, "", "meta")
      threads = array(profile, "", "threads")
      array(profile, "", "libs")
      check_meta(meta, threads ? threads.size : 0) if meta
      if threads
        error("threads", "must not be empty (the profiler cannot open a profile without threads)") if threads.empty?
        threads.each_with_index do |t, i|
          path = "threads[#{i}]"
          if t.is_a?(Hash)
            check_thread(t, path)
          else
            error(path, "must be an object")
          end
        end
      end
      @errors
    end

    private

    def error(path, what)
      @errors << "#{path}: #{what}" if @errors.size < MAX_ERRORS
    end

    def join(path, key)
      path.empty? ? key.to_s : "#{path}.#{key}"
    end

    def field(obj, path, key)
      return obj[key] if obj.key?(key)

      error(join(path, key), "missing")
      nil
    end

    def typed(obj, path, key, desc, nullable: false)
      unless obj.key?(key)
        error(join(path, key), "missing")
        return nil
      end
      v = obj[key]
      return v if nullable && v.nil?
      return v if yield(v)

      error(join(path, key), "must be #{desc}#{nullable ? " or null" : ""}")
      nil
    end

    def object(obj, path, key)
      typed(obj, path, key, "an object") { |v| v.is_a?(Hash) }
    end

    def array(obj, path, key)
      typed(obj, path, key, "an array") { |v| v.is_a?(Array) }
    end

    def string(obj, path, key)
      typed(obj, path, key, "a string") { |v| v.is_a?(String) }
    end

    def bool(obj, path, key)
      typed(obj, path, key, "a boolean") { |v| [true, false].include?(v) }
    end

    def integer(obj, path, key)
      typed(obj, path, key, "an integer") { |v| v.is_a?(Integer) }
    end

    def number(obj, path, key, nullable: false)
      typed(obj, path, key, "a number", nullable: nullable) { |v| v.is_a?(Numeric) }
    end

    # ---- tables --------------------------------------------------------------

    # A struct-of-arrays table; returns its length, or nil if unusable.
    def table(t, path, columns)
      len = integer(t, path, "length")
      n = nil
      if len
        if len.negative?
          error("#{path}.length", "must be >= 0")
        else
          n = len
        end
      end
      ok = !n.nil?
      columns.each do |col|
        c = array(t, path, col)
        if c.nil?
          ok = false
        elsif n && c.size != n
          error("#{path}.#{col}", "has #{c.size} entries but length is #{n}")
          ok = false
        end
      end
      ok ? n : nil
    end

    def each_cell(t, path, col)
      c = t[col]
      return unless c.is_a?(Array)

      c.each_with_index do |v, i|
        why = yield(v, i)
        error("#{path}.#{col}[#{i}]", why) if why
      end
    end

    def index_error(v, limit, nullable, into)
      return nil if nullable && v.nil?
      return "must be an integer index into #{into}#{nullable ? " or null" : ""}" unless v.is_a?(Integer)
      return "#{v} is out of range for #{into} (length #{limit})" if v.negative? || v >= limit

      nil
    end

    def index_column(t, p, col, limit, nullable, into)
      each_cell(t, p, col) { |v, _| index_error(v, limit, nullable, into) }
    end

    def int_column(t, p, col, nullable, min)
      each_cell(t, p, col) do |v, _|
        next nil if nullable && v.nil?

        "must be an integer >= #{min}#{nullable ? " or null" : ""}" unless v.is_a?(Integer) && v >= min
      end
    end

    def number_column(t, p, col, nullable)
      each_cell(t, p, col) do |v, _|
        next nil if v.is_a?(Numeric) || (nullable && v.nil?)

        nullable ? "must be a number or null" : "must be a number"
      end
    end

    def non_negative_column(t, p, col, nullable)
      each_cell(t, p, col) do |v, _|
        next nil if (nullable && v.nil?) || (v.is_a?(Numeric) && v >= 0)

        nullable ? "must be a number >= 0 or null" : "must be a number >= 0"
      end
    end

    def bool_column(t, p, col)
      each_cell(t, p, col) { |v, _| "must be a boolean" unless v == true || v == false }
    end

    def category_columns(t, p, nullable)
      index_column(t, p, "category", @categories.size, nullable, "meta.categories")
      cats = t["category"]
      each_cell(t, p, "subcategory") do |v, i|
        c = cats.is_a?(Array) ? cats[i] : nil
        if !c.is_a?(Integer) || c.negative? || c >= @categories.size
          next nil if (nullable && v.nil?) || v.is_a?(Integer)

          next "must be an integer"
        end
        next "must be an integer (its category is set)" unless v.is_a?(Integer)

        n = @categories[c]
        "#{v} is out of range for category #{c}'s #{n} subcategories" if v.negative? || v >= n
      end
    end

    # ---- the profile -----------------------------------------------------------

    def check_meta(meta, thread_count)
      p = "meta"
      v = integer(meta, p, "preprocessedProfileVersion")
      error("#{p}.preprocessedProfileVersion", "is #{v}, this check is for #{VERSION}") if v && v != VERSION
      integer(meta, p, "version")
      v = number(meta, p, "interval")
      error("#{p}.interval", "must be > 0") if v && v <= 0
      number(meta, p, "startTime")
      number(meta, p, "processType")
      string(meta, p, "product")
      v = integer(meta, p, "stackwalk")
      error("#{p}.stackwalk", "must be 0 or 1") if v && v != 0 && v != 1
      %w[endTime profilingStartTime profilingEndTime].each { |k| number(meta, p, k) if meta.key?(k) }
      bool(meta, p, "symbolicated") if meta.key?("symbolicated")
      # sampleUnits (optional): the unit of samples.threadCPUDelta.
      if meta.key?("sampleUnits") && (su = object(meta, p, "sampleUnits"))
        sp = "#{p}.sampleUnits"
        (t = string(su, sp, "time")) && t != "ms" && error("#{sp}.time", "must be \"ms\" (v48)")
        (e = string(su, sp, "eventDelay")) && e != "ms" && error("#{sp}.eventDelay", "must be \"ms\"")
        if (u = string(su, sp, "threadCPUDelta"))
          if CPU_DELTA_UNITS.include?(u)
            @cpu_delta_unit = true
          else
            error("#{sp}.threadCPUDelta", "\"#{u}\" is not ns, \u00b5s or variable CPU cycles")
          end
        end
      end

      if (cats = array(meta, p, "categories"))
        grey = false
        cats.each_with_index do |c, i|
          cp = "#{p}.categories[#{i}]"
          subs = 0
          if c.is_a?(Hash)
            string(c, cp, "name")
            if (color = string(c, cp, "color"))
              error("#{cp}.color", "unknown colour \"#{color}\"") unless COLORS.include?(color)
              grey ||= color == "grey"
            end
            if (s = array(c, cp, "subcategories"))
              subs = s.size
              error("#{cp}.subcategories", "must not be empty (subcategory 0 is the category itself)") if subs.zero?
              s.each_with_index { |x, k| error("#{cp}.subcategories[#{k}]", "must be a string") unless x.is_a?(String) }
            end
          else
            error(cp, "must be an object")
          end
          @categories << subs
        end
        error("#{p}.categories", "has no grey category (the profiler's default category for samples without a stack)") unless grey
      end

      if (schemas = array(meta, p, "markerSchema"))
        schemas.each_with_index { |s, i| check_schema(s, "#{p}.markerSchema[#{i}]") }
      end

      %w[initialVisibleThreads initialSelectedThreads].each do |list|
        next unless meta.key?(list)

        a = array(meta, p, list) or next
        a.each_with_index do |x, i|
          why = index_error(x, thread_count, false, "threads")
          error("#{p}.#{list}[#{i}]", why) if why
        end
      end
    end

    def check_schema(s, sp)
      unless s.is_a?(Hash)
        error(sp, "must be an object")
        return
      end
      name = string(s, sp, "name")
      %w[tooltipLabel tableLabel chartLabel].each { |k| string(s, sp, k) if s.key?(k) }
      if (display = array(s, sp, "display"))
        display.each_with_index do |d, k|
          error("#{sp}.display[#{k}]", "must be a v48 display location") unless DISPLAY_LOCATIONS.include?(d)
        end
      end
      fields = []
      # v48 lists fields under "data"; "fields" is v55's name.
      if (data = array(s, sp, "data"))
        data.each_with_index do |f, k|
          fp = "#{sp}.data[#{k}]"
          unless f.is_a?(Hash)
            error(fp, "must be an object")
            next
          end
          unless f.key?("key") # a static {label, value} entry
            string(f, fp, "label")
            string(f, fp, "value")
            next
          end
          key = string(f, fp, "key")
          string(f, fp, "label") if f.key?("label")
          bool(f, fp, "searchable") if f.key?("searchable")
          format = field(f, fp, "format")
          fmt = nil
          if format.is_a?(String)
            fmt = format
            unless STRING_FORMATS.include?(fmt) || NUMBER_FORMATS.include?(fmt) || %w[unique-string list].include?(fmt)
              error("#{fp}.format", "\"#{fmt}\" is not a v48 format")
            end
          elsif format.is_a?(Hash) && format["type"] == "table"
            fmt = "table"
          elsif f.key?("format")
            error("#{fp}.format", "must be a format name or a table format")
          end
          fields << [key, fmt] if key
        end
      end
      return unless name

      error("#{sp}.name", "\"#{name}\" is used by another schema") if @schemas.key?(name)
      @schemas[name] ||= fields
    end

    def check_thread(t, p)
      string(t, p, "processType")
      number(t, p, "processStartupTime")
      number(t, p, "processShutdownTime", nullable: true)
      number(t, p, "registerTime")
      number(t, p, "unregisterTime", nullable: true)
      array(t, p, "pausedRanges")
      string(t, p, "name")
      bool(t, p, "isMainThread")
      string(t, p, "pid") # a string since v47
      if t.key?("tid")
        error("#{p}.tid", "must be a number or a string") unless t["tid"].is_a?(Numeric) || t["tid"].is_a?(String)
      else
        error("#{p}.tid", "missing")
      end
      string(t, p, "processName") if t.key?("processName")

      nstrings = nil
      if (sa = array(t, p, "stringArray"))
        nstrings = sa.size
        sa.each_with_index { |s, i| error("#{p}.stringArray[#{i}]", "must be a string") unless s.is_a?(String) }
      end

      rt = object(t, p, "resourceTable")
      nresources = rt && table(rt, "#{p}.resourceTable", %w[lib name host type])
      if rt && nresources && nstrings
        index_column(rt, "#{p}.resourceTable", "name", nstrings, false, "stringArray")
        index_column(rt, "#{p}.resourceTable", "host", nstrings, true, "stringArray")
      end
      ns = object(t, p, "nativeSymbols")
      nsymbols = ns && table(ns, "#{p}.nativeSymbols", %w[libIndex address name functionSize])

      ft = object(t, p, "funcTable")
      fp = "#{p}.funcTable"
      nfuncs = ft && table(ft, fp, %w[name isJS relevantForJS resource fileName lineNumber columnNumber])
      if ft && nfuncs && nstrings
        index_column(ft, fp, "name", nstrings, false, "stringArray")
        index_column(ft, fp, "fileName", nstrings, true, "stringArray")
        bool_column(ft, fp, "isJS")
        bool_column(ft, fp, "relevantForJS")
        each_cell(ft, fp, "resource") do |v, _|
          next nil if v == -1

          index_error(v, nresources || 0, false, "resourceTable (or -1)")
        end
        int_column(ft, fp, "lineNumber", true, 0)
        int_column(ft, fp, "columnNumber", true, 0)
      end

      fr = object(t, p, "frameTable")
      frp = "#{p}.frameTable"
      nframes = fr && table(fr, frp, %w[address inlineDepth category subcategory func nativeSymbol
                                         innerWindowID implementation line column])
      if fr && nframes
        int_column(fr, frp, "address", false, -1)
        int_column(fr, frp, "inlineDepth", false, 0)
        category_columns(fr, frp, true)
        index_column(fr, frp, "func", nfuncs, false, "funcTable") if nfuncs
        index_column(fr, frp, "nativeSymbol", nsymbols, true, "nativeSymbols") if nsymbols
        number_column(fr, frp, "innerWindowID", true)
        index_column(fr, frp, "implementation", nstrings, true, "stringArray") if nstrings
        int_column(fr, frp, "line", true, 0)
        int_column(fr, frp, "column", true, 0)
      end

      st = object(t, p, "stackTable")
      sp = "#{p}.stackTable"
      nstacks = st && table(st, sp, %w[frame category subcategory prefix])
      if st && nstacks
        index_column(st, sp, "frame", nframes, false, "frameTable") if nframes
        category_columns(st, sp, false)
        each_cell(st, sp, "prefix") do |v, i|
          next nil if v.nil?
          next "must be an integer index into stackTable or null" unless v.is_a?(Integer) && v >= 0

          "#{v} is not < #{i} (its own index)" if v >= i
        end
      end

      if (sm = object(t, p, "samples"))
        smp = "#{p}.samples"
        n = table(sm, smp, %w[stack time])
        if (wt = string(sm, smp, "weightType")) && !WEIGHT_TYPES.include?(wt)
          error("#{smp}.weightType", "\"#{wt}\" is not samples, tracing-ms or bytes")
        end
        if sm.key?("weight")
          w = sm["weight"]
          if w.nil?
            # every weight is 1
          elsif !w.is_a?(Array)
            error("#{smp}.weight", "must be an array or null")
          elsif n && w.size != n
            error("#{smp}.weight", "has #{w.size} entries but length is #{n}")
          else
            number_column(sm, smp, "weight", false)
          end
        else
          error("#{smp}.weight", "missing")
        end
        if n
          index_column(sm, smp, "stack", nstacks, true, "stackTable") if nstacks
          number_column(sm, smp, "time", false)
          time = sm["time"]
          (1...time.size).each do |i|
            if time[i].is_a?(Numeric) && time[i - 1].is_a?(Numeric) && time[i] < time[i - 1]
              error("#{smp}.time[#{i}]", "goes back in time (samples must be sorted)")
            end
          end
        end
        # threadCPUDelta (optional): a CPU delta >= 0 or null per sample, in
        # the unit meta.sampleUnits gives (required with the column).
        if sm.key?("threadCPUDelta") && (d = array(sm, smp, "threadCPUDelta"))
          error("#{smp}.threadCPUDelta", "has #{d.size} entries but length is #{n}") if n && d.size != n
          non_negative_column(sm, smp, "threadCPUDelta", true)
          error("#{smp}.threadCPUDelta", "needs meta.sampleUnits.threadCPUDelta (its unit)") unless @cpu_delta_unit
        end
      end

      # jsAllocations (optional): v48's JsAllocationsTable.
      if t.key?("jsAllocations") && (ja = object(t, p, "jsAllocations"))
        jp = "#{p}.jsAllocations"
        n = table(ja, jp, %w[time className typeName coarseType weight inNursery stack])
        (wt = string(ja, jp, "weightType")) && wt != "bytes" && error("#{jp}.weightType", "must be \"bytes\"")
        if n
          number_column(ja, jp, "time", false)
          %w[className typeName coarseType].each do |col|
            each_cell(ja, jp, col) { |v, _| "must be a string" unless v.is_a?(String) }
          end
          non_negative_column(ja, jp, "weight", false)
          bool_column(ja, jp, "inNursery")
          index_column(ja, jp, "stack", nstacks, true, "stackTable") if nstacks
          time = ja["time"]
          (1...time.size).each do |i|
            if time[i].is_a?(Numeric) && time[i - 1].is_a?(Numeric) && time[i] < time[i - 1]
              error("#{jp}.time[#{i}]", "goes back in time (allocations must be sorted)")
            end
          end
        end
      end

      mk = object(t, p, "markers")
      check_markers(mk, "#{p}.markers", nstrings, nstacks) if mk
    end

    def check_markers(mk, mp, nstrings, nstacks)
      n = table(mk, mp, %w[data name startTime endTime phase category])
      return unless n

      index_column(mk, mp, "name", nstrings, false, "stringArray") if nstrings
      index_column(mk, mp, "category", @categories.size, false, "meta.categories")
      number_column(mk, mp, "startTime", true)
      number_column(mk, mp, "endTime", true)
      start = mk["startTime"]
      finish = mk["endTime"]
      each_cell(mk, mp, "phase") do |v, i|
        next "must be 0 (instant), 1 (interval), 2 or 3" unless v.is_a?(Integer) && v.between?(0, 3)

        need_start = v != 3
        need_end = [1, 3].include?(v)
        next "phase #{v} needs a startTime" if need_start && !start[i].is_a?(Numeric)
        next "phase #{v} needs an endTime" if need_end && !finish[i].is_a?(Numeric)

        "interval ends (#{finish[i]}) before it starts (#{start[i]})" if v == 1 && finish[i] < start[i]
      end
      each_cell(mk, mp, "data") do |d, i|
        next nil if d.nil?
        next "must be an object or null" unless d.is_a?(Hash)
        next "needs a string \"type\"" unless d["type"].is_a?(String)

        # Keys the profiler reads whatever the schema: "cause" is a backtrace
        # ({stack, time?, tid?}) that the v60 upgrader rewrites, and crashes on
        # if it is not an object; "innerWindowID" a page id; "stack" is Gecko's
        # pre-processing form of a cause.
        at = "#{mp}.data[#{i}]"
        if d.key?("cause")
          cause = d["cause"]
          if cause.is_a?(Hash) && cause.key?("stack")
            why = index_error(cause["stack"], nstacks || 0, false, "stackTable")
            error("#{at}.cause.stack", why) if why
          else
            error("#{at}.cause", "must be an object {stack, time} (a backtrace), not a value to display")
          end
        end
        if d.key?("innerWindowID") && !d["innerWindowID"].is_a?(Numeric)
          error("#{at}.innerWindowID", "must be a number (a browser page id)")
        end
        error("#{at}.stack", "is the Gecko format's marker stack; processed profiles use cause") if d.key?("stack")
        fields = @schemas[d["type"]]
        next "type \"#{d["type"]}\" has no schema in meta.markerSchema" unless fields

        fields.each do |key, format|
          v = d[key]
          next if v.nil? # fields are optional

          fat = "#{at}.#{key}"
          error(fat, "must be a string (format #{format})") if STRING_FORMATS.include?(format) && !v.is_a?(String)
          error(fat, "must be a number (format #{format})") if NUMBER_FORMATS.include?(format) && !v.is_a?(Numeric)
          if format == "unique-string"
            why = index_error(v, nstrings || 0, false, "stringArray")
            error(fat, why) if why
          end
        end
        nil
      end
    end
  end
end
