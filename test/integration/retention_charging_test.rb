# frozen_string_literal: true

require "test_helper"
require "pathname"
require "support/pprof_raw"

# What a retention profile charges to the program: not Fathom's own objects
# (set apart, counted in a comment), and not Ruby's internals (compiled
# code, method caches: one row of their own). Real programs run under the
# profiler, read back with go tool pprof (docs/internals/retention.md, "Fathom's own
# objects and Ruby internals").
class RetentionChargingTest < Minitest::Test
  DEMO = File.join(TestHelper::ROOT, "examples/leaky_app.rb")
  INTERNALS = "Ruby internals: compiled code, method caches"
  REQUESTS = 3000

  def setup
    require_native!
    skip_unless_go!
    @dir = Dir.mktmpdir("fathom-retention-charging")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def own_comment(raw)
    line = raw.output.lines.find { |l| l.start_with?("Comment: fathom.retention.own ") } or flunk("no own comment")
    m = line.match(/objects=(\d+) bytes=(\d+)/)
    [Integer(m[1]), Integer(m[2])]
  end

  # Rows of `go tool pprof -top` (default flags): name => [flat, cum] as printed.
  def top_rows(path)
    go_pprof("-top", path).lines.filter_map do |line|
      m = line.match(/^\s*(\S+)\s+\S+%\s+\S+%\s+(\S+)\s+\S+%\s+(.+)$/) or next
      [m[3], [m[1], m[2]]]
    end
  end

  # The demo as script/demo profiles it (with a wall profiler too: its
  # @profilers → {:wall} → @collector and drainer thread were charged to
  # the app): (a) nothing of Fathom's is charged, and no path runs through
  # Fathom; (b) Ruby's internals are one named row with one frame, and no
  # class is charged for its method entries; (c) the leak is the top
  # retainer, with its bytes.
  def test_the_demo_charges_the_leak_not_fathom_or_ruby_internals
    base = File.join(@dir, "demo")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap,gc,wall,retention", "--interval", "0.5ms", "-o", base,
                                            "--", RbConfig.ruby, DEMO,
                                            env: TestHelper::PLAIN_ENV.merge("LEAKY_APP_REQUESTS" => REQUESTS.to_s))
    assert status.success?, err
    out = "#{base}.retention.pb.gz"
    raw = PprofRaw.read(out)
    names = raw.function_names

    # (a) Fathom itself: no frame at all (no program object hangs behind
    # one of its objects here), and it is counted apart.
    fathom = names.grep(/Fathom|vm → Fathom\b|thread "fathom-/)
    assert_empty fathom, "Fathom's objects charged to the program"
    own_objects, own_bytes = own_comment(raw)
    assert_operator own_objects, :>, 100, raw.output.lines.grep(/Comment/).join
    assert_operator own_bytes, :>, 100_000

    # (b) Ruby internals: only as one single-frame row.
    internals = raw.samples.select { |s| s.functions.include?(INTERNALS) }
    refute_empty internals
    internals.each { |s| assert_equal [INTERNALS], s.functions }
    internal_bytes = raw.flat("inuse_space", INTERNALS)
    assert_operator internal_bytes, :>, 100_000
    assert_equal internal_bytes, raw.flat("retained_space", INTERNALS), "read flat, retained_space = its bytes"
    # What showed before: "via <imemo> (<imemo>)" under Gem::Specification
    # (Class) → "via Class (<imemo>)", "via Module → via <imemo> (<imemo>)",
    # and the literals only compiled code holds ("… → via Class → via
    # <imemo> → via <imemo> (String)"). Imemos that stay are blocks' envs
    # (a proc's or a frame's captured locals), never a class's.
    assert_empty names.grep(/via (Class|Module)( → via <imemo>)* \(<imemo>\)|\(<iclass>\)/)
    # An object compiled code holds and something else holds too (a stack,
    # another root) is the program's, and may still be named through the
    # code: a few literals, not the 1.2MB of method entries and iseqs.
    named_through_code = raw.samples.select { |s| s.functions.first.match?(/via (Class|Module) → via <imemo>/) }
    assert_operator named_through_code.sum { |s| s.values[raw.index_of("inuse_space")] }, :<, 4096
    rows = top_rows(out)
    assert_equal 1, rows.count { |name, _| name == INTERNALS }, rows.inspect
    flat, cum = rows.to_h.fetch(INTERNALS)
    assert_equal flat, cum, "one frame: flat is cum"

    # (c) The leak: the top retainer, its bytes all there.
    sessions = /SessionStore::SESSIONS \(Hash\)\z/
    by_retained = raw.samples.group_by { |s| s.functions.first }
                     .transform_values { |l| l.sum { |s| s.values[raw.index_of("retained_space")] } }
    assert_match sessions, by_retained.max_by { |_, v| v }.first
    leak = raw.cum("inuse_space", sessions)
    assert_operator leak, :>=, REQUESTS * 800, "the sessions' payloads"
    assert_operator leak, :>, (raw.total("inuse_space") - internal_bytes) / 2, "most of the program's bytes"
    assert_match sessions, rows.reject { |n, _| n.start_with?("(root") }.max_by { |_, (_, c)| to_bytes(c) }.first

    report, err, status = TestHelper.run_fathom("report", out, "--top", "3")
    assert status.success?, err
    table = report.lines[3]
    assert_match(/SessionStore::SESSIONS \(Hash\)$/, table, report)
    refute_match(/Fathom::|Ruby internals/, report.lines[0, report.lines.index { |l| l.start_with?("Ruby's own") }].join)
    assert_match(/^Ruby's own objects, one row of their own \(in the totals, not in the table\):\n.* #{INTERNALS}$/, report)
    assert_match(/^Fathom itself, not charged \(not in the totals\):\n\s+\S+\s+#{own_objects}  Fathom itself: /, report)
  end

  # User objects Fathom also holds are the program's, charged on the
  # program's path as if Fathom did not hold them: a block given to Fathom
  # that the program keeps too, the program's middleware behind Fathom's
  # (whose own frame names the path and is charged nothing), a string
  # literal that an iseq and a constant share. A block only Fathom keeps is
  # Fathom's.
  def test_program_objects_fathom_also_holds_stay_the_programs
    script = File.join(@dir, "shared.rb")
    out = File.join(@dir, "shared.pb.gz")
    File.write(script, <<~RUBY)
      # frozen_string_literal: true
      require "fathom"
      require "fathom/rack"
      require "fathom/always_on/start_in_workers"

      def make_hook(n)
        rows = Array.new(n) { |i| "row-\#{i}-" * 20 }
        proc { rows.size }
      end
      HOOK = make_hook(2000)                                  # the program keeps the block
      Fathom::AlwaysOn::StartInWorkers.after_fork(&HOOK)                # and so does Fathom
      Fathom::AlwaysOn::StartInWorkers.after_fork(&make_hook(3000))     # only Fathom keeps this one

      class Downstream
        def initialize = @cache = Array.new(1500) { |i| "cached-\#{i}-" * 20 }
        def call(env) = [200, {}, []]
      end
      APP = Fathom::Rack::Middleware.new(Downstream.new)
      GREETING = "#{"hello " * 2000}"                          # also the script's iseq's literal

      # In-process: the captured local `rows` is named only by that walk.
      Fathom.retention_snapshot(out: #{out.dump}, progress: nil, fork: false)
    RUBY
    _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", script)
    assert status.success?, err
    raw = PprofRaw.read(out)
    space = raw.index_of("inuse_space")

    hook = raw.samples.select { |s| s.functions.any? { |f| f.end_with?("HOOK (Proc)") } }
    refute_empty hook, "the block the program keeps"
    rows = hook.select { |s| s.functions.include?("rows (Array)") }
    refute_empty rows
    assert_includes rows.first.functions, "(captured) (<imemo>)", "its env is on the program's path"
    assert_operator hook.sum { |s| s.values[space] }, :>, 2000 * 100
    refute(raw.samples.any? { |s| s.functions.any? { |f| f.include?("StartInWorkers") } })

    downstream = raw.samples.select { |s| s.functions.include?("@app (Downstream)") }
    refute_empty downstream, raw.function_names.grep(/APP|Downstream/).inspect
    chain = downstream.first.functions.reverse
    assert_equal ["APP (Fathom::Rack::Middleware)", "@app (Downstream)"],
                 chain.select { |f| f.match?(/APP|Downstream/) }.map { |f| f.sub(/\A.*→ /, "") }, chain.inspect
    assert_operator raw.cum("inuse_space", "@app (Downstream)"), :>, 1500 * 120
    assert_empty raw.samples.select { |s| s.functions.first.include?("Fathom::") }, "no Fathom object is charged"

    greeting = raw.samples.select { |s| s.functions.first.end_with?("GREETING (String)") }
    assert_equal 1, greeting.size, raw.function_names.grep(/GREETING/).inspect
    assert_operator greeting.first.values[space], :>=, 12_000

    # The block only Fathom keeps, and what it captured, are Fathom's:
    # 3000 rows are not charged anywhere.
    charged_rows = raw.samples.sum { |s| s.functions.first == "rows (Array)" ? s.values[raw.index_of("inuse_objects")] : 0 }
    assert_equal 1, charged_rows
    own_objects, = own_comment(raw)
    assert_operator own_objects, :>, 3000
  end

  private

  def to_bytes(text)
    m = text.match(/\A([\d.]+)([kMG]?B)\z/) or return 0
    m[1].to_f * { "B" => 1, "kB" => 1e3, "MB" => 1e6, "GB" => 1e9 }.fetch(m[2])
  end
end
