# frozen_string_literal: true

require "test_helper"
require "support/fuzz"

# Every option of the Ruby API with values of every kind (see Fuzz.value):
# each call must work or raise TypeError/ArgumentError whose one-line
# message names the option. Seeded and time-bounded (test/support/fuzz.rb).
class OptionFuzzTest < Minitest::Test
  # What a call may raise besides TypeError/ArgumentError naming the option:
  # Files::AtomicFile refusing a path (a directory, a device, a file it did not
  # write) is a Fathom::Error naming the path.
  REFUSED_PATH = /is a directory|is a device|not a regular file|symbolic link|cannot write|did not write it/.freeze

  FakeProfiler = Struct.new(:flushes) do
    def flush(gc: false)
      Fathom::Profile.new("x".b, { gc: gc })
    end
  end

  def setup
    @dir = Dir.mktmpdir("fathom-fuzz")
    @findings = []
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # Calls the block with one option (or an unknown one) set to a random
  # value; checks what came out.
  def fuzz(target, options, also: nil, min_cases: 1, seconds: Fuzz::SECONDS)
    cases = Dir.chdir(@dir) do
      Fuzz.run(target, min_cases: min_cases, seconds: seconds) do |rng, n|
        name, pool = options.to_a.sample(random: rng)
        opts, named =
          if rng.rand(20).zero?
            [{ fathom_bogus: 1 }, ":fathom_bogus"]
          else
            [{ name => Fuzz.value(rng, pool) }, name.to_s]
          end
        outcome(Fuzz.where(target, n), opts, named, also) { yield opts }
      end
    end
    # Each case is checked in outcome(); these two say so to minitest (the
    # test counted 0 assertions, as if it checked nothing).
    assert_operator cases, :>=, min_cases, "#{target}: fuzz cases run"
    assert_empty @findings, "#{@findings.size} failure(s), first:\n#{@findings.first(5).join("\n")}"
  end

  def outcome(where, opts, named, also)
    yield
  rescue TypeError, ArgumentError => e
    return if named_in?(e, named)

    @findings << "#{where}: #{describe(opts)}: #{e.class}: #{Fathom::Options.clean(e.message, 300)}\n    " \
                 "#{e.backtrace.first(4).join("\n    ")}"
  rescue Exception => e # rubocop:disable Lint/RescueException -- NoMemoryError, SystemStackError... are findings too
    return if also && also.any? { |klass, pattern| klass === e && pattern.match?(e.message.scrub) }

    @findings << "#{where}: #{describe(opts)}: #{e.class}: #{Fathom::Options.clean(e.message, 300)}\n    " \
                 "#{e.backtrace.first(4).join("\n    ")}"
  end

  # Methods with a fixed keyword list (flush(gc:), write(path, overwrite:))
  # leave unknown keywords to Ruby: "unknown keyword: :fathom_bogus".
  def named_in?(error, named)
    error.instance_of?(TypeError) || error.instance_of?(ArgumentError) or return false
    message = error.message
    return false unless message.valid_encoding? # a message must print
    (message.start_with?("fathom: ") || message.start_with?("unknown keyword")) && message.lines.size == 1 &&
      message.match?(/(?<![\w-])#{Regexp.escape(named)}(?![\w-])/)
  end

  def describe(opts)
    opts.map { |k, v| "#{k}: #{Fathom::Options.shown(v)}" }.join(", ")
  end

  def profile_bytes
    @profile_bytes ||= File.binread(File.join(TestHelper::ROOT, "examples/gc_profile.json.gz"))
  end

  def heap_pprof
    skip_unless_protoc!
    @heap_pprof ||= TextProfile.new.sample(%w[leaf main], [1, 64, 1, 64], { "class" => "String" }).gzipped
  end

  def test_heap_profiler_new
    require_native!
    fuzz("HeapProfiler.new", { exact: [true, false], interval: ["1ms", 0.001, 1], max_depth: [1, 64, 4096],
                               liveness: %i[auto object_id weakmap] }) do |opts|
      Fathom::HeapProfiler.new(**opts)
    end
  end

  def test_gc_profiler_new
    require_native!
    fuzz("GcProfiler.new", { coalesce: [0, "10ms", 60], flush_on_major: [true, false], format: %i[pprof firefox] }) do |opts|
      Fathom::GcProfiler.new(**opts)
    end
  end

  def test_retention_profiler_new
    fuzz("RetentionProfiler.new", { max_depth: [3, 64, 4096] }) { |opts| Fathom::RetentionProfiler.new(**opts) }
  end

  # Valid options run a real (short) profile: kept rare by the pools, and a
  # retention snapshot rarer still (it walks the whole heap).
  def test_fathom_profile
    require_native!
    modes = [:heap, :gc, "heap,gc", %i[heap gc], [:gc, "heap"]]
    fuzz("Fathom.profile",
         { mode: modes, out: ["x.pb.gz", "d/x.pb.gz", @dir, "/dev/null"], overwrite: [true, false],
           format: %i[pprof firefox], exact: [true, false], interval: ["1ms"], max_depth: [8],
           liveness: [:auto], coalesce: ["1ms", 0], flush_on_major: [false] },
         also: [[Fathom::Error, REFUSED_PATH]]) do |opts|
      Fathom.profile(**opts) { nil }
    end
  end

  def test_retention_snapshot
    require_native!
    fuzz("Fathom.retention_snapshot",
         { out: ["r.pb.gz", @dir], gc: [false], max_depth: [3, 8], progress: [nil, :auto, StringIO.new] },
         also: [[Fathom::Error, REFUSED_PATH]]) do |opts|
      # Success walks the heap: only with one option given, and no GC.
      Fathom.retention_snapshot(gc: false, progress: nil, **opts)
    end
  end

  def test_heap_profiler_methods
    require_native!
    profiler = Fathom::HeapProfiler.new(exact: true)
    fuzz("HeapProfiler#flush", { gc: [false] }) { |opts| profiler.flush(**opts) }
    fuzz("HeapProfiler#live_objects", { limit: [1, 100, 0xFFFF_FFFF] }) { |opts| profiler.live_objects(**opts) }
    fuzz("HeapProfiler#live_sites", { top: [1, 5], per_site: [1, 3], focus: [[]], limit: [1, 100] }) do |opts|
      profiler.live_sites(**{ top: 1, per_site: 1, focus: [] }.merge(opts))
    end
    gc = Fathom::GcProfiler.new
    fuzz("GcProfiler#flush", { gc: [true, false], gzip: [true, false] }) { |opts| gc.flush(**opts) }
  end

  def test_explain_sites
    require_native!
    profiler = Fathom::HeapProfiler.new(exact: true)
    fuzz("Retention.explain_sites",
         { heap_profiler: [nil, FakeProfiler.new(0), Fathom::GcProfiler.new], top: [1, 5], per_site: [1, 3],
           max_depth: [4], progress: [nil], gc: [false] }) do |opts|
      target = opts.key?(:heap_profiler) ? opts.delete(:heap_profiler) : profiler
      # A real profiler with valid options takes a snapshot: allowed once
      # in a while (the pools make it rare).
      Fathom::Retention.explain_sites(target, progress: nil, gc: false, **opts)
    end
  end

  def test_profile_write_load_and_new
    bytes = profile_bytes
    fuzz("Profile#write", { path: ["p.json.gz", "d/p.json.gz", @dir, "/dev/null"], overwrite: [true, false] },
         also: [[Fathom::Error, REFUSED_PATH]]) do |opts|
      Fathom::Profile.new(bytes, format: :firefox).write(opts.fetch(:path, "p.json.gz"), **opts.except(:path))
    end
    File.binwrite(File.join(@dir, "junk.pb.gz"), "junk")
    fuzz("Profile.load", { path: ["p.json.gz", "junk.pb.gz", "/dev/zero", "missing.pb.gz", @dir] },
         also: [[Fathom::Error, //], [SystemCallError, //]]) do |opts|
      next if opts.key?(:fathom_bogus)

      loaded = Fathom::Profile.load(opts[:path])
      loaded.report if loaded.format == :firefox
    end
    fuzz("Profile.new", { bytes: [bytes, "x"], stats: [{}, nil], path: ["a.pb.gz"], kind: %i[heap gc retention],
                          format: %i[pprof firefox] }) do |opts|
      next if opts.key?(:fathom_bogus)

      Fathom::Profile.new(opts.fetch(:bytes, bytes), opts.fetch(:stats, {}), **opts.except(:bytes, :stats)).to_s
    end
  end

  def test_reports
    pprof = heap_pprof
    firefox = profile_bytes
    decoded = Fathom::Pprof.read(pprof)
    fuzz("Profile#report", { sample_index: ["inuse_space", :alloc_space, 0, 3], top: [1, 10, nil] }) do |opts|
      Fathom::Profile.new(pprof).report(**opts)
      Fathom::Profile.new(firefox, format: :firefox).report(**opts)
    end
    fuzz("Report.for_bytes", { bytes: [pprof, firefox], sample_index: ["inuse_space", 1], top: [1, nil] },
         also: [[Fathom::Error, //]]) do |opts|
      Fathom::Report.for_bytes(opts.fetch(:bytes, pprof), **opts.except(:bytes)).to_s
    end
    fuzz("Report::Diff.new", { before: [decoded], after: [decoded], sample_index: ["inuse_space", 0], top: [1] },
         also: [[Fathom::Error, //]]) do |opts|
      next if opts.key?(:fathom_bogus)

      Fathom::Report::Diff.new(opts.fetch(:before, decoded), opts.fetch(:after, decoded), **opts.except(:before, :after)).to_s
    end
    fuzz("Report classes", { profile: [decoded] }) do |opts|
      next if opts.key?(:fathom_bogus)

      [Fathom::Report::Top, Fathom::Report::GcSummary, Fathom::Report::Retention].each do |klass|
        klass.new(opts[:profile]).to_s
      rescue Fathom::Error
        nil # a heap profile is not a GC or retention profile
      end
    end
    fuzz("Pprof.read", { bytes_or_path: [pprof, Pathname.new(File::NULL)] },
         also: [[Fathom::Error, //], [SystemCallError, //]]) do |opts|
      next if opts.key?(:fathom_bogus)

      Fathom::Pprof.read(opts[:bytes_or_path])
    end
  end

  def test_periodic_flusher_new
    profiler = FakeProfiler.new(0)
    # A pattern without %{index} names the same file in every case: from the
    # second case on, a file another flusher wrote, which is refused.
    exists = [Fathom::Error, /exists and Fathom did not write it; refusing to overwrite it/]
    fuzz("PeriodicFlusher.new", { profiler: [profiler], dir: ["out"], interval: [1, "1ms"], pattern: ["p-%{index}.pb.gz"],
                                  gc: [true, false] }, also: [exists]) do |opts|
      flusher = Fathom::PeriodicFlusher.new(opts.fetch(:profiler, profiler), dir: opts.fetch(:dir, "out"), **opts.except(:profiler, :dir))
      flusher.flush_now
    end
  end
end
