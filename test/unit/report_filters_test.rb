# frozen_string_literal: true

require "test_helper"
require "support/importer_profile"
require "support/cli_runner"

# The report's filters (Report::View: --focus, --ignore, --hide, --thread,
# --hide-gc) and --method, on a hand-built profile whose every value is
# known. On real profiles: test/integration/csv_import_reports_test.rb.
class ReportFiltersTest < Minitest::Test
  include CLIRunner

  CPU_TYPES = [%w[samples count], %w[cpu nanoseconds], %w[wall nanoseconds]].freeze

  def setup
    skip_unless_protoc!
    @dir = Dir.mktmpdir("fathom-filters")
    @app = ImporterProfile.write_source(@dir)
    @path = File.join(@dir, "heap.pb.gz")
    File.binwrite(@path, ImporterProfile.text_profile(@app).gzipped)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def top(**view)
    filtered = Fathom::Report::View.new(**view).apply(Fathom::Pprof.read_file(@path))
    Fathom::Report::Top.new(filtered, by: :function, top: nil, sample_index: "alloc_space")
  end

  def flat(**view)
    top(**view).rows.to_h { |r| [r.name, r.flat] }.reject { |_, v| v.zero? }
  end

  def test_focus_keeps_samples_through_a_matching_frame
    assert_equal({ "String#split" => 16_000, "Order.new" => 8_000, "ActiveSupport::Inflector#camelize" => 500 },
                 flat(focus: "Importer#parse"))
    # A file matches too: every frame of the stdlib's csv.
    assert_equal({ "String#split" => 16_000 }, flat(focus: %r{/csv/}))
  end

  def test_ignore_drops_samples_through_a_matching_frame
    assert_equal({ "String#*" => 3_000_000, "Order.new" => 8_000, "ActiveSupport::Inflector#camelize" => 500 },
                 flat(ignore: "CSV::"))
    assert_equal({ "String#*" => 3_000_000 }, flat(ignore: "Importer#parse"))
  end

  # hide: a gem's (or any) frames leave the stacks; their values fall to
  # the caller, so "only my code" charges the gem's work to the app line.
  def test_hide_gives_a_hidden_frames_value_to_its_caller
    assert_equal({ "String#*" => 3_000_000, "String#split" => 16_000, "Order.new" => 8_000, "Importer#parse" => 500 },
                 flat(hide: "/gems/"))
    hidden = Fathom::Report::View.new(hide: "/gems/").apply(Fathom::Pprof.read_file(@path))
    sites = Fathom::Report::Top.new(hidden, by: :gem, top: nil, sample_index: "alloc_space").rows.to_h { |r| [r.name, r.flat] }
    assert_equal({ "app" => 3_008_500, "csv (stdlib)" => 16_000 }, sites)
  end

  def test_thread_keeps_one_thread
    assert_equal({ "Order.new" => 8_000 }, flat(thread: "worker"))
    e = assert_raises(ArgumentError) do
      Fathom::Report.for_bytes(File.binread(@path), view: Fathom::Report::View.new(thread: "nope", cli: true))
    end
    assert_match(/--thread "nope": no such thread in this profile \(threads: main, worker\)/, e.message)
  end

  def test_hide_gc_on_a_cpu_profile
    t = TextProfile.new(CPU_TYPES)
    t.files["Garbage Collection"] = ["", 0]
    t.sample(%w[work main], [3, 30_000_000, 30_000_000], { "thread name" => "main", "state" => "running" })
    t.sample(["Garbage Collection"], [2, 20_000_000, 20_000_000], { "thread name" => "main", "state" => "gc" })
    t.sample(%w[work main], [1, 10_000_000, 10_000_000], { "thread name" => "main", "state" => "gc" })
    t.default_sample_type = "cpu"
    path = File.join(@dir, "cpu.pb.gz")
    File.binwrite(path, t.gzipped)
    all = run_cli("report", path)
    assert_match(/Garbage Collection$/, all.out)
    r = run_cli("report", "--hide-gc", path)
    assert_equal 0, r.status, r.err
    refute_match(/Garbage Collection/, r.out)
    assert_match(/^Filtered: --hide-gc \(1 of 3 samples kept\)$/, r.out)
    assert_match(/^\s+30ms\s+100%\s+100%\s+30ms\s+100%  work$/, r.out)
    # GC time is gone from the threads table too.
    assert_match(/^\s+main\s+30ms\s+30ms\s+0\s+0\s+0\s+3$/, r.out)
    assert_match(/--hide-gc applies to CPU and wall profiles \(a heap profile has no GC samples\)/, run_cli("report", "--hide-gc", @path).err)
  end

  def test_filters_are_said_in_the_header_and_checked
    r = run_cli("report", "--focus", "Importer#parse", "--ignore", "CSV", @path)
    assert_equal 0, r.status, r.err
    assert_match(/^Filtered: --focus Importer#parse, --ignore CSV \(2 of 4 samples kept\)$/, r.out)
    assert_match(/--focus is not a valid regular expression .*, got "\(unclosed"/, run_cli("report", "--focus", "(unclosed", @path).err)
    assert_equal 2, run_cli("report", "--focus", "(unclosed", @path).status
    assert_match(/--focus must not be empty/, run_cli("report", "--focus", "", @path).err)
  end

  def test_method_shows_callers_callees_and_the_source
    r = run_cli("report", "--method", "Importer#run", @path)
    assert_equal 0, r.status, r.err
    text = r.out
    assert_match(/\AImporter#run \(.*app\.rb:\d+\)\n  inuse_space: 2\.86MB self \(99\.34%\), 2\.88MB total \(100%\)\n/, text)
    assert_match(/^  callers:\n\s+2\.88MB\s+100%  <main> .*app\.rb:30$/, text)
    assert_match(/^  callees \(2\.88MB\):\n\s+2\.86MB\s+99\.34%  String#\*\n\s+19\.53kB\s+0\.66%  Importer#parse .*app\.rb:20$/, text)
    assert_match(/^\s+2\.86MB\s+2\.88MB  \|\s+12    CACHE\[key\] = JSON\.generate\(rows\) \* 20$/, text)
    assert_match(/^\s+\|\s+11  def run\(rows\)$/, text)
    # A C method: its callers, no source.
    c = run_cli("report", "--method", "String#split", "--sample-index", "alloc_space", @path).out
    assert_match(/^  callers:\n\s+15\.62kB\s+100%  CSV::Parser#parse ruby\/3\.1\.0\/csv\/parser\.rb:876$/, c)
    refute_match(/code:/, c)
    # Part of a name: every match (largest total first).
    assert_match(/\AImporter#run .*^Importer#parse /m, run_cli("report", "--method", "Importer#", @path).out)
    miss = run_cli("report", "--method", "Importer#nope", @path)
    assert_equal 2, miss.status
    assert_match(/--method "Importer#nope": no function of that name in this profile/, miss.err)
  end

  def test_the_source_missing_still_gives_values_by_line
    FileUtils.rm_f(@app)
    text = run_cli("report", "--method", "Importer#run", @path).out
    assert_match(/^  code: .*app\.rb is not readable here; values by line:\n\s+2\.86MB\s+2\.88MB  \|\s+12$/, text)
  end
end
