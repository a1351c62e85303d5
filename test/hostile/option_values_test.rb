# frozen_string_literal: true

require "test_helper"
require "support/option_assertions"
require "pathname"
require "fathom/always_on/settings"

# Issue 10, item 9: values that got past the option checks and failed deep
# inside (FloatDomainError, RangeError, NoMethodError). Each must now raise
# TypeError/ArgumentError naming the option, or work.
class OptionValuesTest < Minitest::Test
  include OptionAssertions

  # "1e99999999" built 10**99999999 (warning "b may be too big", then
  # Infinity) and FloatDomainError on #round.
  def test_huge_exponent_strings_are_out_of_range
    assert_option_error(ArgumentError, "interval") { Fathom::HeapProfiler.new(interval: "1e99999999") }
    error = assert_option_error(ArgumentError, "coalesce") { Fathom::GcProfiler.new(coalesce: "1e99999999") }
    assert_match(/must be between 1ns and 60s, got "1e99999999"/, error.message)
    assert_option_error(ArgumentError, "interval") { Fathom::HeapProfiler.new(interval: "1e-99999999") }
    assert_option_error(ArgumentError, "interval") { Fathom.profile(interval: "99999999999999999999999999999999e99") { nil } }
  end

  # 1e300 seconds * 1e9 is Infinity as a Float.
  def test_huge_floats_are_out_of_range
    assert_option_error(ArgumentError, "interval") { Fathom::HeapProfiler.new(interval: 1e300) }
    assert_option_error(ArgumentError, "coalesce") { Fathom::GcProfiler.new(coalesce: Float::MAX) }
    assert_option_error(ArgumentError, "interval") { Fathom::HeapProfiler.new(interval: 10**400) }
    assert_option_error(ArgumentError, "interval") { Fathom::HeapProfiler.new(interval: Rational(10**400, 3)) }
  end

  def test_a_duration_still_parses_exactly
    assert_equal 100_000, Fathom::Options.duration_ns("x", "0.1ms")
    assert_equal 1_500_000_000, Fathom::Options.duration_ns("x", "15e-1")
    assert_equal 500_000, Fathom::Options.duration_ns("x", ".5ms")
    assert_equal 10_000_000, Fathom::Options.duration_ns("x", 0.01)
    assert_equal 1, Fathom::Options.duration_ns("x", "1e-40") # at least 1ns, as before
  end

  def test_long_duration_and_integer_strings_are_refused_quickly
    assert_option_error(ArgumentError, "interval") { Fathom::HeapProfiler.new(interval: "1#{"0" * 100_000}") }
    assert_option_error(ArgumentError, "--max-depth") { Fathom::Options.parse_integer("--max-depth", "9" * 100_000, 1..4096) }
  end

  # NUM2LONG in the extension raised "bignum too big to convert into `long'".
  def test_live_objects_limit_is_bounded
    require_native!
    profiler = Fathom::HeapProfiler.new(exact: true)
    error = assert_option_error(ArgumentError, "limit") { profiler.live_objects(limit: 2**70) }
    assert_match(/limit must be in 1\.\.4294967295/, error.message)
    assert_option_error(TypeError, "limit") { profiler.live_objects(limit: "5") }
    assert_equal [], profiler.live_objects(limit: 0xFFFF_FFFF)
    assert_option_error(ArgumentError, "top") { profiler.live_sites(top: 2**70, per_site: 1, focus: []) }
    assert_option_error(ArgumentError, "per_site") { profiler.live_sites(top: 1, per_site: 0, focus: []) }
    assert_option_error(TypeError, "focus") { profiler.live_sites(top: 1, per_site: 1, focus: nil) }
    assert_equal [], profiler.live_sites(top: 5, per_site: 3, focus: [], limit: 0xFFFF_FFFF)
  end

  # explain_sites(nil) called nil.live_objects after a full GC.
  def test_explain_sites_checks_its_arguments
    assert_option_error(TypeError, "heap_profiler") { Fathom::Retention.explain_sites(nil) }
    assert_option_error(TypeError, "heap_profiler") { Fathom::Retention.explain_sites(Object.new) }
    require_native!
    profiler = Fathom::HeapProfiler.new(exact: true)
    assert_option_error(ArgumentError, "top") { Fathom::Retention.explain_sites(profiler, top: 2**70) }
    assert_option_error(ArgumentError, "per_site") { Fathom::Retention.explain_sites(profiler, per_site: 0) }
    assert_raises(ArgumentError) { Fathom::Retention.explain_sites(profiler, bogus: 1) }
  end

  # max_depth: 2 passed the check (2..4096), walked the whole heap, then
  # failed in the encoder: "internal error: max_depth must be ... at least 3".
  def test_retention_max_depth_matches_the_encoder
    assert_option_error(ArgumentError, "max_depth") { Fathom.retention_snapshot(max_depth: 2) }
    assert_option_error(ArgumentError, "max_depth") { Fathom::RetentionProfiler.new(max_depth: 2) }
    require_native!
    assert_equal :retention, Fathom.retention_snapshot(max_depth: 3, gc: false, progress: nil).kind
  end

  # fathom run's environment: FATHOM_COALESCE had no upper bound here, so
  # the error came later from GcProfiler, naming "coalesce", not the variable.
  def test_autorun_variables_have_the_profilers_bounds
    ENV["FATHOM_COALESCE"] = "61s"
    assert_option_error(ArgumentError, "FATHOM_COALESCE") { Fathom::AlwaysOn::Settings.profilers([:gc], ENV) }
    ENV["FATHOM_COALESCE"] = "1e99999999"
    assert_option_error(ArgumentError, "FATHOM_COALESCE") { Fathom::AlwaysOn::Settings.profilers([:gc], ENV) }
    ENV["FATHOM_COALESCE"] = nil
    ENV["FATHOM_INTERVAL"] = "1e99999999"
    assert_option_error(ArgumentError, "FATHOM_INTERVAL") { Fathom::AlwaysOn::Settings.profilers([:heap], ENV) }
  ensure
    ENV["FATHOM_COALESCE"] = ENV["FATHOM_INTERVAL"] = nil
  end

  # Objects without #is_a?, #inspect or #respond_to? got NoMethodError from
  # the checks themselves.
  def test_basic_objects_get_a_type_error
    odd = BasicObject.new
    assert_option_error(TypeError, "interval") { Fathom::HeapProfiler.new(interval: odd) }
    assert_option_error(TypeError, "max_depth") { Fathom::HeapProfiler.new(max_depth: odd) }
    assert_option_error(TypeError, "exact") { Fathom::HeapProfiler.new(exact: odd) }
    assert_option_error(TypeError, "mode") { Fathom.profile(mode: odd) { nil } }
    assert_option_error(TypeError, "out") { Fathom.profile(out: odd) { nil } }
    assert_option_error(TypeError, "format") { Fathom::GcProfiler.new(format: odd) }
    assert_option_error(TypeError, "progress") { Fathom.retention_snapshot(progress: odd) }
  end

  def test_objects_with_odd_inspect
    raising = Object.new
    def raising.inspect = raise("inspect failed")
    assert_option_error(TypeError, "max_depth") { Fathom::HeapProfiler.new(max_depth: raising) }
    long = Object.new
    def long.inspect = "x\n" * 10_000
    error = assert_option_error(TypeError, "max_depth") { Fathom::HeapProfiler.new(max_depth: long) }
    assert_operator error.message.size, :<, 300
  end

  # String#to_sym raised EncodingError, String#split ArgumentError.
  def test_strings_with_invalid_bytes
    assert_option_error(ArgumentError, "mode") { Fathom.profile(mode: "heap\xff") { nil } }
    assert_option_error(ArgumentError, "format") { Fathom::GcProfiler.new(format: "\xff") }
    assert_option_error(ArgumentError, "interval") { Fathom::HeapProfiler.new(interval: "1\xffms") }
  end

  # File.expand_path raised "string contains null byte" / "user ... doesn't exist".
  def test_paths_that_file_cannot_expand
    skip_unless_protoc!
    profile = Fathom::Profile.new(TextProfile.new.sample(%w[a], [1, 1, 1, 1]).gzipped)
    assert_option_error(ArgumentError, "path") { profile.write("a\0b.pb.gz") }
    assert_option_error(ArgumentError, "path") { profile.write("~fathom-no-such-user/x.pb.gz") }
    assert_option_error(ArgumentError, "out") { Fathom.profile(out: "~fathom-no-such-user/x") { nil } }
    assert_option_error(TypeError, "path") { profile.write(Pathname.new("x").then { |p| def p.to_path = 42; p }) }
  end

  # Found by the option fuzzer: a path too long for the file system raised
  # Errno::ENAMETOOLONG from File.lstat deep in Files::AtomicFile; it is refused
  # like any path that may not be written, and the message stays printable.
  def test_paths_the_file_system_refuses
    error = assert_raises(Fathom::Error) { Fathom.profile(out: "x" * 5000) { nil } }
    assert_match(/\Afathom: cannot write .*x{100}.*: File name too long\z/, error.message)
    error = assert_option_error(ArgumentError, "out") { Fathom.profile(out: "~\xe5\x12pP") { nil } }
    assert error.message.valid_encoding?
  end

  # Found by the option fuzzer: Pprof.read called #respond_to? and #class,
  # which a BasicObject lacks.
  def test_pprof_read_argument
    assert_option_error(TypeError, "bytes_or_path") { Fathom::Pprof.read(BasicObject.new) }
    assert_option_error(TypeError, "bytes_or_path") { Fathom::Pprof.read(42) }
    odd = Object.new
    def odd.to_path = 42
    assert_option_error(TypeError, "bytes_or_path") { Fathom::Pprof.read(odd) }
  end

  def test_mode_lists
    assert_option_error(TypeError, "mode") { Fathom.profile(mode: { heap: true }) { nil } }
    assert_option_error(TypeError, "mode") { Fathom.profile(mode: [[:heap]]) { nil } }
    assert_option_error(TypeError, "mode") { Fathom.profile(mode: nil) { nil } }
  end
end
