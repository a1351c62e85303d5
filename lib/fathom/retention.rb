# frozen_string_literal: true

require_relative "options"
require_relative "modes"
require_relative "native"
require_relative "notice"
require_relative "process/own_threads"
require_relative "profile"
require_relative "process/ractor_check"
require_relative "process/ruby_guards"
require_relative "process/fork_hooks"
require_relative "constant_sources"
require_relative "string_census"

module Fathom
  # Retention analysis: why objects are still alive.
  #
  # A snapshot walks the heap from the GC roots (stopping the world: it holds
  # the GVL for the walk and the naming of references, and reports how long
  # in stats[:gvl_held_ns]), computes the dominator tree and each object's
  # retained size without the GVL, and encodes a pprof whose stacks are
  # reference chains — root category at the bottom, then the named edges
  # (Registry::SESSIONS, @payload, [3], {:key}, $cache...) down to the object.
  #
  #   profile = Fathom.retention_snapshot(out: "retained.pb.gz")
  #   puts profile.report
  #   # later, after the suspected leak grew:
  #   Fathom.retention_snapshot(out: "retained2.pb.gz")
  #   # $ fathom diff retained.pb.gz retained2.pb.gz
  module Retention
    DEFAULTS = { gc: true, max_depth: Modes::DEFAULTS.fetch(:retention).fetch(:max_depth), progress: :auto,
                 string_contents: Modes::DEFAULTS.fetch(:retention).fetch(:string_contents),
                 fork: true, fork_timeout: 300, strings: false }.freeze
    # The forked child's deadline, in seconds (it is killed past it).
    FORK_TIMEOUT_RANGE = (1..86_400).freeze
    # What the forked child may map beyond what it inherits: its graph,
    # dominator arrays and profile take about 100-200 bytes per object
    # (bench/retention.rb); this allows 1 GiB plus 1 kB per live object.
    FORK_MEMORY_BASE = 1 << 30
    FORK_MEMORY_PER_OBJECT = 1024
    FORK_ENV = "FATHOM_RETENTION_FORK"
    MAX_DEPTH_RANGE = Options::RETENTION_DEPTH_RANGE
    # explain_sites(top:, per_site:): each picked object is followed by the
    # snapshot; more than this many is not an explanation anymore.
    SITES_RANGE = (1..100_000).freeze

    module_function

    # Takes a snapshot now and returns a Fathom::Profile (kind :retention),
    # written atomically to `out` when given. gc: run a full GC first (so
    # only reachable objects are counted). progress: an IO for progress
    # lines (shown once a snapshot takes more than a second), nil for none,
    # :auto for $stderr (through Fathom.notice). focus: objects whose retention paths to return in
    # profile.stats[:focus_paths] (Array of Arrays of frame names, root first;
    # nil for an object that is not reachable), and in stats[:focus_roots]
    # the root categories that hold each one themselves (["machine_context"]
    # when a C stack slot points at it; nil when not reachable).
    #
    # An object is named by its owner: a constant, ivar or global that holds
    # it wins over a thread's stack or the C stack (machine_context) that
    # also holds it for the moment; a stack names only what nothing else
    # holds (docs/internals/retention.md, "Owners before stacks").
    #
    # Fathom's own objects are set apart: the Fathom module, its modules and
    # classes (with their singleton classes), their instances and Fathom's
    # threads, and whatever only they lead to, are charged to nothing; the
    # profile's "fathom.retention.own" comment counts them. An object the
    # program holds too is charged to the program, as if Fathom did not hold
    # it; a Ruby object of the program's that only a Fathom object holds
    # (the middleware behind Fathom::Rack::Middleware) stays the program's.
    # Ruby's internals (imemos but a block's env: compiled code, method
    # caches; iclasses) and what only they hold are one row of their own,
    # "Ruby internals: compiled code, method caches"
    # (docs/internals/retention.md, "Fathom's own objects and Ruby internals").
    #
    # fork: true (the default) walks a copy-on-write image of the heap in a
    # forked child: the app pauses only for fork() (milliseconds, growing
    # with RSS), not for the walk (about 0.25 s per million objects). The
    # child runs no Ruby code and exits with _exit; it is killed once it has
    # used fork_timeout seconds of CPU, or is still past fork_timeout seconds
    # (docs/internals/retention.md, "Forked snapshots"). The profile says which walk ran (a "walk=forked"
    # or "walk=in-process" comment, stats[:walk]). The in-process walk runs
    # instead with fork: false, FATHOM_RETENTION_FORK=0, with focus: (unless
    # fork: true is given too: then the child follows them), where fork()
    # is unavailable or fails. A forked snapshot runs no GC first
    # unless gc: true is given (the walk follows reachability from the roots
    # either way), and names a proc's captured locals only "(captured)"
    # (docs/internals/retention.md, "Forked snapshots").
    #
    # string_contents: false (the default) keeps the program's data out of
    # the profile: a String hash key (and a dynamic Symbol's) is named by
    # its shape, {"…" 32 bytes #8bcd} (length and a 16-bit hash, the same in
    # every snapshot, so diffs match), never by its bytes. true names it
    # {"sk_live_…"}, for local debugging only.
    #
    # strings: true adds a census of duplicated strings (StringCensus:
    # `fathom report FILE --strings`), walking every String with the GVL
    # held (~0.5 s per million strings); their contents only with
    # string_contents. `fathom run` and Fathom.profile take it at the end.
    def snapshot(out: nil, focus: nil, stamp: nil, string_sites: nil, **opts)
      take_planned(planned { plan_snapshot(out, focus, stamp, opts, "Fathom.retention_snapshot", string_sites) })
    end

    # The heap profiler says where live memory was allocated; this says why
    # it is still alive. Takes the `top` allocation sites with the most live
    # samples in `heap_profiler`, up to `per_site` objects of each, and a
    # snapshot that follows them: stats[:sites] is
    #   [{site:, live_samples:, paths: [[frames, objects], ...]}, ...]
    # with each distinct retention path (dominator path, root first) and how
    # many of the site's objects it holds. Report::SiteRetention prints it.
    # The paths follow the snapshot's naming rule (owners before stacks):
    # objects that only a stack holds get a path, and so a line, of their own.
    def explain_sites(heap_profiler, top: 5, per_site: 3, stamp: nil, **opts)
      plan = planned do
        unless HeapProfiler === heap_profiler
          raise TypeError, "fathom: heap_profiler must be a Fathom::HeapProfiler, got #{Options.describe(heap_profiler)}"
        end

        top = Options.integer("top", top, SITES_RANGE)
        per_site = Options.integer("per_site", per_site, SITES_RANGE)
        # The snapshot's options are checked now, not after a GC and the pick.
        Options.check_unknown!(opts, DEFAULTS.keys, "Fathom::Retention.explain_sites")
        GC.start # exact mode: only objects that survive a GC count as live
        # Picked natively: only the focus array holds the objects (the
        # snapshot ignores its references, and sets the array apart as
        # Fathom's); no Array of Fathom's holds them, to be left on the C
        # stack for the snapshot's conservative root to charge to the program
        # (docs/internals/retention.md, "Why the top sites are alive").
        focus = []
        sites = heap_profiler.live_sites(top: top, per_site: per_site, focus: focus)
        plan_snapshot(nil, focus, stamp, opts, "Fathom::Retention.explain_sites", heap_profiler).tap { |p| p.sites = sites }
      end
      profile = take_planned(plan)
      paths = profile.stats[:focus_paths]
      offset = 0
      explained = plan.sites.map do |site, live, picked|
        mine = paths[offset, picked]
        offset += picked
        grouped = mine.group_by { |path| path || ["(not reachable: garbage waiting for GC)"] }
        { site: site, live_samples: live, paths: grouped.map { |path, list| [path, list.size] } }
      end
      Profile.new(profile.bytes, profile.stats.merge(sites: explained), kind: :retention)
    end

    # A snapshot's checked options, its own objects and focus: what
    # `planned` hands to `take_planned`. An instance of a Fathom class, so the
    # walk sets it apart.
    Plan = Struct.new(:gc, :gc_given, :fork, :fork_given, :fork_timeout, :max_depth, :string_contents, :progress,
                      :focus, :own, :out, :stamp, :sites, keyword_init: true)

    # Everything a snapshot does in Ruby before its walk (checking options,
    # listing Fathom's own objects, picking the objects to explain) runs
    # in this block, one C frame below the caller; when it returns, the
    # stack it used is zeroed (Native.with_stack_scrubbed). The walk scans
    # this thread's C stack conservatively, and the Arrays, Hashes and
    # objects this code handled would otherwise sit there in stale slots
    # and be charged to the program under machine_context
    # (docs/internals/retention.md, "Why the top sites are alive").
    def planned
      return yield unless NativeLoader.available?

      Native.with_stack_scrubbed { yield }
    end

    # string_sites: the heap profiler whose sites the string census names.
    def plan_snapshot(out, focus, stamp, opts, where, string_sites = nil)
      Options.check_unknown!(opts, DEFAULTS.keys, where)
      gc_given = opts.key?(:gc)
      fork_given = opts[:fork] == true
      opts = DEFAULTS.merge(opts)
      # :auto prints through Fathom.notice, which never fails the snapshot
      # (a closed or replaced $stderr); an IO given here is the caller's,
      # and a write that fails only ends the progress lines.
      progress = Symbol === opts[:progress] && opts[:progress] == :auto ? Notice::Stream : opts[:progress]
      plan = Plan.new(gc: Options.boolean("gc", opts[:gc]), gc_given: gc_given,
                      fork: Options.boolean("fork", opts[:fork]) && forking?, fork_given: fork_given,
                      fork_timeout: Options.integer("fork_timeout", opts[:fork_timeout], FORK_TIMEOUT_RANGE),
                      max_depth: Options.integer("max_depth", opts[:max_depth], MAX_DEPTH_RANGE),
                      string_contents: Options.boolean("string_contents", opts[:string_contents]),
                      progress: progress, focus: focus, stamp: stamp)
      unless NilClass === progress || Options.responds_to?(progress, :write)
        raise TypeError, "fathom: progress must be an IO (or nil, :auto), got #{Options.describe(progress)}"
      end
      raise TypeError, "fathom: focus must be an Array of objects, got #{Options.describe(focus)}" unless NilClass === focus || Array === focus
      # Other Ractors would mutate the graph while the walk reads it.
      RactorCheck.refuse_if_running!(where)
      RubyGuards.refuse_gc!(:retention, where)

      plan.out = Options.path("out", out) unless NilClass === out
      NativeLoader.require!
      # A process another thread forks while this snapshot runs must not
      # stay "in progress" for life (ForkHooks runs Native.after_fork_child).
      ForkHooks.install
      # Which library defines each namespace: `fathom report --by gem`.
      stamp = quietly { ConstantSources.stamp(stamp) }
      if Options.boolean("strings", opts[:strings])
        stamp = StringCensus.stamp(stamp, string_contents: plan.string_contents, heap_profiler: string_sites)
      end
      plan.stamp = stamp
      plan.own = own_objects
      plan
    end

    # The walk, and the profile, from a Plan.
    def take_planned(plan)
      native = nil
      # focus: forked only when fork: true is asked for (a forked walk names
      # a proc's captured locals "(captured)" only; the leak holders ask).
      if plan.fork && (plan.focus.nil? || plan.fork_given)
        forked = Native::RetentionSnapshot.new(plan.max_depth, plan.string_contents)
        memory = FORK_MEMORY_BASE + FORK_MEMORY_PER_OBJECT * GC.stat(:heap_live_slots)
        args = [plan.gc && plan.gc_given, plan.own, plan.stamp, plan.fork_timeout, memory]
        args << plan.focus if plan.focus
        # false: fork() failed (EAGAIN, ENOMEM): walk in-process instead.
        if (result = quietly { forked.take_forked(*args) })
          native = forked
          paths = result if plan.focus
        end
      end
      unless native
        native = Native::RetentionSnapshot.new(plan.max_depth, plan.string_contents)
        paths = quietly { native.take(plan.gc, plan.progress, plan.focus, plan.own) }
      end
      bytes = native.flush(plan.stamp)
      stats = native.stats.merge(bytes: bytes.bytesize)
      stats[:focus_paths] = paths if plan.focus
      profile = Profile.new(bytes, stats, kind: :retention)
      profile.write(plan.out) if plan.out
      profile
    end

    # Whether snapshots may fork: fork() exists here and
    # FATHOM_RETENTION_FORK is not "0" (ArgumentError for a value other
    # than "0", "1" or empty).
    def forking?
      value = ENV.fetch(FORK_ENV, "")
      unless ["", "0", "1"].include?(value)
        raise ArgumentError, "fathom: #{FORK_ENV} must be 0 or 1, got #{value.inspect}"
      end
      value != "0" && Process.respond_to?(:fork)
    end

    # What the snapshot sets apart as Fathom's own: the Fathom module and
    # every module and class named under it (found through its constants,
    # never triggering an autoload), their singleton classes, and Fathom's
    # live threads. Instances of those classes are own too (the walk checks
    # each object's class against this list).
    def own_objects
      modules = []
      seen = {}.compare_by_identity
      queue = [Fathom]
      quietly do
        until queue.empty?
          mod = queue.shift
          next if seen[mod]

          seen[mod] = true
          modules << mod << mod.singleton_class
          mod.constants(false).each do |name|
            next if mod.autoload?(name)

            value = mod.const_get(name, false)
            queue << value if Module === value && value.name&.start_with?("Fathom::")
          end
        end
      end
      modules.concat(OwnThreads.live)
    end

    # Naming reads every constant (rb_const_get_at, never an autoload), and
    # reading a deprecated one (::Fixnum, Struct::Passwd...) warns under -w.
    def quietly
      verbose = $VERBOSE
      deprecated = Warning[:deprecated]
      $VERBOSE = nil
      Warning[:deprecated] = false
      yield
    ensure
      $VERBOSE = verbose
      Warning[:deprecated] = deprecated
    end
  end

  def self.retention_snapshot(out: nil, **opts)
    Retention.snapshot(out: out, **opts)
  end
end
