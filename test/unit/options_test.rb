# frozen_string_literal: true

require "test_helper"

# Every option of the public entry points is validated before anything native
# happens: wrong type -> TypeError, wrong value -> ArgumentError, and the
# message names the option.
class OptionsTest < Minitest::Test
  O = Fathom::Options

  def assert_error(klass, pattern, &block)
    error = assert_raises(klass, &block)
    assert_match pattern, error.message
    assert error.message.start_with?("fathom: "), error.message
  end

  def test_heap_profiler_interval
    assert_error(ArgumentError, /interval must be a positive duration.*got -1\z/) { Fathom::HeapProfiler.new(interval: -1) }
    assert_error(ArgumentError, /interval must be a positive duration.*got 0/) { Fathom::HeapProfiler.new(interval: 0) }
    assert_error(ArgumentError, /interval .*got Infinity/) { Fathom::HeapProfiler.new(interval: Float::INFINITY) }
    assert_error(ArgumentError, /interval .*got NaN/) { Fathom::HeapProfiler.new(interval: Float::NAN) }
    assert_error(ArgumentError, /interval must be between 10us and 3600s, got 1.0e-09/) { Fathom::HeapProfiler.new(interval: 1e-9) }
    assert_error(ArgumentError, /interval must be between/) { Fathom::HeapProfiler.new(interval: 7200) }
    assert_error(ArgumentError, /interval .*"fast"/) { Fathom::HeapProfiler.new(interval: "fast") }
    assert_error(TypeError, /interval must be .*got nil/) { Fathom::HeapProfiler.new(interval: nil) }
    assert_error(TypeError, /interval .*:fast \(Symbol\)/) { Fathom::HeapProfiler.new(interval: :fast) }
  end

  def test_heap_profiler_exact
    assert_error(TypeError, /exact must be true or false, got 1 \(Integer\)/) { Fathom::HeapProfiler.new(exact: 1) }
    assert_error(TypeError, /exact must be true or false, got nil/) { Fathom::HeapProfiler.new(exact: nil) }
  end

  def test_heap_profiler_max_depth
    assert_error(ArgumentError, /max_depth must be in 1..4096, got 0/) { Fathom::HeapProfiler.new(max_depth: 0) }
    assert_error(ArgumentError, /max_depth must be in 1..4096, got 4097/) { Fathom::HeapProfiler.new(max_depth: 4097) }
    assert_error(TypeError, /max_depth must be an Integer, got 1.5/) { Fathom::HeapProfiler.new(max_depth: 1.5) }
    assert_error(TypeError, /max_depth must be an Integer, got "10"/) { Fathom::HeapProfiler.new(max_depth: "10") }
  end

  def test_heap_profiler_unknown_options_are_listed
    assert_error(ArgumentError, /unknown options :intervall, :depth for Fathom::HeapProfiler.new \(known: exact, interval, max_depth, liveness, census\)/) do
      Fathom::HeapProfiler.new(intervall: 1, depth: 2)
    end
  end

  # A profiler whose options were refused is never returned, but
  # ObjectSpace.each_object still finds it until GC: asking it running?
  # answers false (rack_fork_test asks every profiler).
  def test_a_refused_profiler_is_not_running
    assert_raises(ArgumentError) { Fathom::CpuProfiler.new(interval: -1) }
    assert_raises(ArgumentError) { Fathom::GcProfiler.new(unknown: 1) }
    refute Fathom::CpuProfiler.allocate.running?
    refute Fathom::GcProfiler.allocate.running?
    assert(ObjectSpace.each_object(Fathom::CpuProfiler).none?(&:running?))
  end

  def test_valid_options_reach_the_native_check
    # Valid options pass validation; without the extension the next failure
    # is the LoadError that says how to build it.
    Fathom::HeapProfiler.new(exact: true, interval: "500us", max_depth: 4096).stop
  rescue LoadError => e
    assert_match(/rake compile/, e.message)
  end

  def test_fathom_profile_mode
    assert_error(ArgumentError, /mode must be one of :heap, :gc, :retention, :cpu, :wall, got :io/) { Fathom.profile(mode: :io) { nil } }
    assert_error(ArgumentError, /mode must be one of :heap, :gc, :retention, :cpu, :wall, got :io/) { Fathom.profile(mode: %i[heap io]) { nil } }
    assert_error(ArgumentError, /cpu and wall cannot be profiled together/) { Fathom.profile(mode: %i[cpu wall]) { nil } }
    assert_error(ArgumentError, /mode must name at least one/) { Fathom.profile(mode: []) { nil } }
    assert_error(TypeError, /mode must be a Symbol/) { Fathom.profile(mode: 3) { nil } }
  end

  def test_fathom_profile_out_and_block
    assert_error(TypeError, /out must be a String path/) { Fathom.profile(out: 3) { nil } }
    assert_error(ArgumentError, /out must not be empty/) { Fathom.profile(out: "") { nil } }
    assert_error(ArgumentError, /needs a block/) { Fathom.profile }
  end

  def test_fathom_profile_passes_options_through_validation
    assert_error(ArgumentError, /unknown option :bogus/) { Fathom.profile(bogus: 1) { nil } }
    assert_error(ArgumentError, /interval/) { Fathom.profile(interval: -5) { nil } }
  end

  FakeProfiler = Struct.new(:flushes) do
    def flush(gc: false)
      self.flushes += 1
      Fathom::Profile.new("x".b, { gc: gc })
    end
  end

  def test_periodic_flusher_options
    profiler = FakeProfiler.new(0)
    assert_error(TypeError, /profiler must be a Fathom profiler/) { Fathom::PeriodicFlusher.new(Object.new, dir: "/tmp") }
    assert_error(TypeError, /dir must be a String path/) { Fathom::PeriodicFlusher.new(profiler, dir: 1) }
    assert_error(ArgumentError, /interval must be a positive duration/) { Fathom::PeriodicFlusher.new(profiler, dir: "/tmp", interval: -1) }
    assert_error(ArgumentError, /interval must be between 1ms/) { Fathom::PeriodicFlusher.new(profiler, dir: "/tmp", interval: "10us") }
    assert_error(ArgumentError, /pattern has a % directive Fathom does not fill, got "%\{host\}.pb.gz"/) { Fathom::PeriodicFlusher.new(profiler, dir: "/tmp", pattern: "%{host}.pb.gz") }
    assert_error(ArgumentError, /pattern must be a file name/) { Fathom::PeriodicFlusher.new(profiler, dir: "/tmp", pattern: "a/%{index}") }
    assert_error(TypeError, /pattern must be a String/) { Fathom::PeriodicFlusher.new(profiler, dir: "/tmp", pattern: 42) }
    # nil: the default name for the profiler's kind and format.
    assert_equal Fathom::PeriodicFlusher::DEFAULT_PATTERN, Fathom::PeriodicFlusher.new(profiler, dir: "/tmp", pattern: nil).pattern
    assert_error(TypeError, /gc must be true or false/) { Fathom::PeriodicFlusher.new(profiler, dir: "/tmp", gc: "yes") }
    assert_raises(ArgumentError) { Fathom::PeriodicFlusher.new(profiler, dir: "/tmp", every: 1) }
  end

  def test_report_options
    profile = Fathom::Pprof::Profile.new([%w[inuse_space bytes]], [], {}, {}, {}, [""], 0, 0, nil, 0, nil, [])
    assert_error(ArgumentError, /unknown sample_index "cpu" \(available: inuse_space\)/) { Fathom::Report::Top.new(profile, sample_index: "cpu") }
    assert_error(ArgumentError, /sample_index 3 out of range/) { Fathom::Report::Top.new(profile, sample_index: 3) }
    assert_error(ArgumentError, /top must be a positive Integer/) { Fathom::Report::Top.new(profile, top: 0) }
    assert_error(TypeError, /top must be a positive Integer/) { Fathom::Report::Top.new(profile, top: "5") }
  end

  def test_check_unknown_singular
    assert_error(ArgumentError, /unknown option :x for m \(known: a\)/) { O.check_unknown!({ x: 1 }, [:a], "m") }
    assert_nil O.check_unknown!({ a: 1 }, [:a], "m")
  end

  def test_parse_boolean_and_integer
    assert_equal true, O.parse_boolean("FATHOM_EXACT", "1")
    assert_equal true, O.parse_boolean("FATHOM_EXACT", "true")
    assert_equal false, O.parse_boolean("FATHOM_EXACT", "0")
    assert_error(ArgumentError, /FATHOM_EXACT must be true\/false/) { O.parse_boolean("FATHOM_EXACT", "maybe") }
    assert_equal 64, O.parse_integer("--max-depth", "64", O::MAX_DEPTH_RANGE)
    assert_error(ArgumentError, /--max-depth must be an integer in 1..4096, got "abc"/) { O.parse_integer("--max-depth", "abc", O::MAX_DEPTH_RANGE) }
    assert_error(ArgumentError, /--max-depth must be in 1..4096, got 0/) { O.parse_integer("--max-depth", "0", O::MAX_DEPTH_RANGE) }
    assert_error(ArgumentError, /--top must be an integer of at least 1/) { O.parse_integer("--top", "1.5", 1..) }
  end

  def test_one_of_accepts_strings
    assert_equal :heap, O.one_of("mode", "heap", [:heap])
  end
end
