# frozen_string_literal: true

require "test_helper"
require "fathom/rack"
require "minitest/mock"

# The guards for what a Ruby would get wrong (Fathom::RubyGuards), run on
# the Rubies the project has by faking the Ruby where the guards read it
# (Fathom::RubyVersion). Ruby 4.0 itself is never run: what the fakes
# stand for was read (docs/internals/versions.md, "Ruby 4.0").
class RubyGuardsTest < Minitest::Test
  RUBY_40 = Gem::Version.new("4.0.0")
  # What GC.stat and GC.latest_gc_info answer under MMTk (gc/mmtk/mmtk.c).
  MMTK_STAT_KEYS = %i[count time total_allocated_objects total_bytes used_bytes free_bytes
                      starting_heap_address last_heap_address].freeze

  def as_ruby(version = RUBY_40, id2ref: true, gc: "default", stat_keys: nil, info_keys: nil, &block)
    stat_keys ||= Fathom::RubyVersion.gc_stat_keys
    info_keys ||= Fathom::RubyVersion.latest_gc_info_keys
    v = Fathom::RubyVersion
    v.stub(:current, Gem::Version.new(version)) do
      v.stub(:id2ref_defined?, id2ref) do
        v.stub(:gc_implementation, gc) do
          v.stub(:gc_stat_keys, stat_keys) { v.stub(:latest_gc_info_keys, info_keys, &block) }
        end
      end
    end
  end

  # ---------------------------------------------------------------- this Ruby

  def test_this_ruby_is_refused_nothing
    assert_equal Gem::Version.new(RUBY_VERSION), Fathom::RubyVersion.current
    assert_equal "default", Fathom::RubyVersion.gc_implementation
    %i[heap gc retention dump cpu wall].each { |f| assert_nil Fathom::RubyGuards.gc_refusal(f), f }
    assert_equal :weakmap, Fathom::RubyGuards.liveness!(:weakmap)
    assert_equal :object_id, Fathom::RubyGuards.liveness!(:object_id) # 3.x: _id2ref answers right
  end

  # ----------------------------------------------------------- _id2ref on 4.0

  def test_object_id_liveness_is_refused_on_ruby_4_0
    e = as_ruby { assert_raises(ArgumentError) { Fathom::RubyGuards.liveness!(:object_id) } }
    assert_match(/\Afathom: liveness: :object_id is not supported on Ruby 4\.0\.0 yet: ObjectSpace\._id2ref/, e.message)
    assert_match(/Bug #22200/, e.message)
    assert_match(/use liveness: :weakmap/, e.message)
    assert_equal :weakmap, as_ruby { Fathom::RubyGuards.liveness!(:weakmap) }
    # A 4.0 patch release or preview is 4.0 too.
    as_ruby("4.0.6") { assert_raises(ArgumentError) { Fathom::RubyGuards.liveness!(:object_id) } }
    assert_equal :object_id, as_ruby("3.4.5") { Fathom::RubyGuards.liveness!(:object_id) }
  end

  def test_object_id_liveness_is_refused_where_id2ref_is_gone
    e = as_ruby("4.1.0", id2ref: false) { assert_raises(ArgumentError) { Fathom::RubyGuards.liveness!(:object_id) } }
    assert_match(/not supported on Ruby 4\.1\.0: it needs ObjectSpace\._id2ref.*Feature #22135/, e.message)
  end

  def test_heap_profiler_refuses_object_id_and_auto_picks_weakmap_on_ruby_4_0
    e = as_ruby { assert_raises(ArgumentError) { Fathom::HeapProfiler.new(liveness: :object_id) } }
    assert_match(/liveness: :object_id/, e.message)
    require_native!
    assert_equal :weakmap, as_ruby { Fathom::HeapProfiler.new.liveness }
    assert_equal :weakmap, as_ruby { Fathom::HeapProfiler.new(liveness: :weakmap).liveness }
  end

  # -------------------------------------------------- GC keys and modular GC

  def test_every_gc_feature_is_refused_under_another_gc_library
    as_ruby("3.4.5", gc: "mmtk", stat_keys: MMTK_STAT_KEYS, info_keys: %i[state]) do
      { heap: "heap profiling", gc: "GC profiling", retention: "a retention snapshot", dump: "a heap dump" }.each do |f, name|
        assert_equal "#{name} is not supported with the \"mmtk\" GC (RUBY_GC_LIBRARY): Fathom reads the default " \
                     "GC's event hooks, GC.stat keys and heap pages", Fathom::RubyGuards.gc_refusal(f)
      end
      assert_nil Fathom::RubyGuards.gc_refusal(:cpu)
      assert_nil Fathom::RubyGuards.gc_refusal(:wall)
    end
  end

  def test_a_missing_gc_key_is_named
    stat = Fathom::RubyVersion.gc_stat_keys - %i[heap_live_slots minor_gc_count]
    as_ruby(stat_keys: stat, info_keys: %i[gc_by state]) do
      assert_equal "GC profiling is not supported on Ruby 4.0.0 yet: it reads GC.stat(:heap_live_slots), " \
                   "GC.stat(:minor_gc_count), GC.latest_gc_info(:major_by), which this Ruby's GC does not have",
                   Fathom::RubyGuards.gc_refusal(:gc)
      assert_match(/a retention snapshot is not supported .* GC\.stat\(:heap_live_slots\)/, Fathom::RubyGuards.gc_refusal(:retention))
      assert_nil Fathom::RubyGuards.gc_refusal(:heap)
    end
  end

  def test_profilers_refuse_to_start_and_stay_stopped
    require_native!
    as_ruby(gc: "mmtk") do
      [Fathom::GcProfiler.new, Fathom::HeapProfiler.new].each do |profiler|
        e = assert_raises(Fathom::Error) { profiler.start }
        assert_match(/\Afathom: #{profiler.class.name}#start: .* is not supported with the "mmtk" GC/, e.message)
        refute profiler.running?
        refute_includes Fathom::ForkHooks.registered, profiler
      end
      e = assert_raises(Fathom::Error) { Fathom.retention_snapshot(fork: false) }
      assert_match(/\Afathom: Fathom\.retention_snapshot: a retention snapshot is not supported/, e.message)
    end
  end

  def test_heap_dump_is_refused_before_anything_is_written
    require_native!
    Dir.mktmpdir("fathom-guard") do |dir|
      path = File.join(dir, "heap.json")
      e = as_ruby(gc: "mmtk") { assert_raises(Fathom::Error) { Fathom.heap_dump(path) } }
      assert_match(/\Afathom: Fathom\.heap_dump: a heap dump is not supported/, e.message)
      refute File.exist?(path)
    end
  end

  # Ruby 4.0 keeps these instance variables in an imemo of their owner
  # (retention_walk.cc, ProbeImemoFields): the chain must still end in the
  # ivar's name, under the owner, and not in the "Ruby internals" row. On
  # 3.x, where the owner holds them itself, this is the chain as it was.
  class FieldsHolder; end

  def test_instance_variables_of_classes_and_strings_stay_the_programs
    require_native!
    cache = Array.new(50) { |i| "cached #{i}" }
    FieldsHolder.instance_variable_set(:@cache, cache)
    $fathom_tagged = +"tagged" # rubocop:disable Style/GlobalVars
    tag = "a tag" * 10
    $fathom_tagged.instance_variable_set(:@tag, tag) # rubocop:disable Style/GlobalVars
    profile = Fathom.retention_snapshot(focus: [cache, tag], progress: nil)
    class_path, string_path = profile.stats[:focus_paths].map { |paths| paths.first.split(" → ") }
    # 3.x: "… → RubyGuardsTest::FieldsHolder → @cache (Array)"; 4.0 adds
    # "(instance variables)" between the two, and nothing else.
    assert_ivar_step class_path, "RubyGuardsTest::FieldsHolder", "@cache (Array)"
    assert_ivar_step string_path, "$fathom_tagged", "@tag (String)"
    (class_path + string_path).each { |step| refute_match(/Ruby internals|<imemo>/, step) }
  ensure
    FieldsHolder.remove_instance_variable(:@cache) if FieldsHolder.instance_variable_defined?(:@cache)
    $fathom_tagged = nil # rubocop:disable Style/GlobalVars
  end

  def assert_ivar_step(path, owner, ivar)
    at = path.index(owner)
    assert at, "#{owner} not in #{path.inspect}"
    assert_includes [[ivar], ["(instance variables)", ivar]], path[(at + 1)..], path.inspect
  end

  def test_endpoints_answer_501_with_the_reason
    require_native!
    app = Fathom::Rack::App.new(enabled: true)
    env = ->(path) { { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => "", "REMOTE_ADDR" => "127.0.0.1",
                       "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_VERSION" => "HTTP/1.1" } }
    as_ruby(gc: "mmtk") do
      { "retention" => "a retention snapshot", "dump" => "a heap dump" }.each do |name, what|
        status, _, body = app.call(env.("/debug/fathom/#{name}"))
        assert_equal 501, status, body.join
        assert_includes body.join, "fathom: #{what} is not supported with the \"mmtk\" GC"
      end
    end
  end
end
