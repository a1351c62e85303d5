# frozen_string_literal: true

require "test_helper"
require "support/native_leak"
require "fathom/cli"

# Issue 45's acceptance: the leak verdicts on seven apps whose truth is
# known (test/fixtures/leaks/scenarios.rb), each run under always-on heap
# profiling with FATHOM_LEAKS=1, 30 windows (or more) of known work each:
# a window is a count of work, flushed by the app itself
# (PeriodicFlusher#flush_now), never a time, so a busy machine changes how
# long a window takes, not what it holds.
#
# How often each verdict could be wrong by chance:
#
# - The exact runs (FATHOM_EXACT=1, every allocation recorded, a full GC
#   before each flush) are deterministic: each window's in-use bytes per
#   site are the same in every run. The one thing that varies is Ruby's
#   conservative scan of the C stack, which can keep a few garbage objects
#   of the churn alive through a flush: a few kB at most, against the
#   64 KiB a site must grow by before it can be a leak. Chance of a wrong
#   verdict: none.
# - The sampled runs (the default mode, FATHOM_INTERVAL=1ms) are not: a
#   site's bytes are its samples' weights. A flat site called a leak needs
#   its rise to pass the sampling gate twice, over the whole segment and
#   over the recent half, at 6 standard deviations of the windows' own
#   sampling noise (Leaks::Trend): about 1e-9 a site and window under the
#   normal approximation. Only a site whose rise reaches half the 64 KiB
#   threshold can be called one at all, whatever its noise; the test
#   asserts that the flat apps have at most MAX_LARGE_SITES such sites
#   (3 to 6 on Ruby 3.1, up to 13 on 3.3), and with 23 windows judged in
#   each run the union bound is 20 x 23 x 1e-9 < 5e-7 a run (and the
#   Mann–Kendall p <= 0.001 each needs as well only lowers it).
#   The sampled steady leak leaks 4 MB a window of 1 kB strings (about 200
#   new samples a window): at window 10 its recent gate reads 15-25
#   standard deviations on this machine, so missing it there needs a
#   shortfall of 9 or more: under 1e-18.
class LeakVerdictsTest < Minitest::Test
  FIXTURE = File.join(TestHelper::ROOT, "test/fixtures/leaks/scenarios.rb")
  SCENARIOS = %w[steady plateau lru batch double slow native].freeze
  SAMPLED = { "steady" => { "LEAK_SCALE" => "20", "LEAK_WINDOWS" => "12" },
              "plateau" => {}, "lru" => {}, "batch" => {} }.freeze
  MAX_LARGE_SITES = 20
  THRESHOLD = Fathom::Leaks::Rules::DEFAULTS[:min_bytes]
  PARALLEL = 3

  Run = Struct.new(:name, :mode, :dir, :log, :status, :files, keyword_init: true)

  @runs = nil
  @lock = Mutex.new

  class << self
    # Every app, run once for the whole class (PARALLEL at a time).
    def runs(test)
      @lock.synchronize { @runs ||= run_all(test) }
    end

    def run_all(test)
      root = Dir.mktmpdir("fathom-leaks")
      Minitest.after_run { FileUtils.rm_rf(root) }
      ext = NativeLeak.load_path
      jobs = SCENARIOS.map { |s| [s, :exact, { "FATHOM_EXACT" => "1", "LEAK_GC" => "1" }] } +
             SAMPLED.map { |s, env| [s, :sampled, { "FATHOM_INTERVAL" => "1ms" }.merge(env)] }
      queue = Queue.new
      jobs.each { |j| queue << j }
      results = {}
      threads = Array.new(PARALLEL) do
        Thread.new do
          while (job = (queue.pop(true) rescue nil)) # rubocop:disable Style/RescueModifier
            name, mode, env = job
            results[[name, mode]] = run_one(root, ext, name, mode, env)
          end
        end
      end
      threads.each(&:join)
      results
    end

    def run_one(root, ext, name, mode, env)
      dir = File.join(root, "#{name}-#{mode}")
      full = TestHelper::PLAIN_ENV.merge("FATHOM_DIR" => dir, "FATHOM_MODE" => "heap", "FATHOM_EVERY" => "1h",
                                         "FATHOM_LEAKS" => "1", "LEAK_WINDOWS" => "30").merge(env)
      out, status = Open3.capture2e(full, RbConfig.ruby, "-I#{TestHelper::LIB}", "-I#{ext}", "-rfathom/setup",
                                    FIXTURE, name, chdir: TestHelper::ROOT)
      files = Dir[File.join(dir, "heap-*.pb.gz")].sort_by { |f| f[/-(\d+)\.pb\.gz\z/, 1].to_i }
      Run.new(name: name, mode: mode, dir: dir, log: out, status: status, files: files)
    end
  end

  def setup
    require_native!
  end

  def run_of(name, mode = :exact)
    run = self.class.runs(self).fetch([name, mode])
    assert run.status.success?, "#{name} (#{mode}) failed:\n#{run.log}"
    run
  end

  # `fathom leaks --json FILES...`: [document, exit status].
  def leaks(files)
    out = StringIO.new
    err = StringIO.new
    status = Fathom::CLI.new(stdout: out, stderr: err).run(["leaks", "--json", *files])
    assert_includes [0, 3], status, err.string
    [JSON.parse(out.string), status]
  end

  # The line of the fixture marked "site: NAME".
  def site_line(name)
    @lines ||= File.readlines(FIXTURE)
    index = @lines.index { |l| l.include?("site: #{name}") } or flunk("no site: #{name} in the fixture")
    "test/fixtures/leaks/scenarios.rb:#{index + 1}"
  end

  def leak_sites(doc)
    doc.fetch("processes").flat_map { |p| p["sites"] }.select { |s| s["leak"] }
  end

  # The monitor's log line for a leak at `label`: [windows, confidence %, line].
  def logged_leak(run, label)
    line = run.log.lines.find { |l| l.start_with?("fathom: LEAK  #{label} ") } or return nil
    windows = line[/confidence over (\d+) windows/, 1].to_i
    confidence = line[/, (>?[\d.]+)% confidence/, 1].delete(">").to_f
    [windows, confidence, line]
  end

  def assert_found_early(run, label, holder, klass)
    # The RSS a Ruby leak adds is its objects' (and the steps of malloc's
    # arenas and the profiler's tables beside them): never growth outside Ruby.
    refute_match(/^fathom: GROWTH OUTSIDE RUBY/, run.log, "#{run.name} (#{run.mode})")
    windows, confidence, line = logged_leak(run, label)
    refute_nil windows, "no LEAK line for #{label} in the log:\n#{run.log}"
    assert_operator windows, :<=, 10, line
    assert_operator confidence, :>=, 95.0, line
    assert_includes line, "held by #{holder}", line

    doc, status = leaks(run.files.first(10))
    assert_equal 3, status
    site = leak_sites(doc).find { |s| s["label"] == label } or
      flunk("#{label} not a leak over the first 10 windows: #{doc["processes"].first["sites"].find { |s| s["label"] == label }}")
    assert_equal klass, site["class"]
    assert_operator site["windows"], :<=, 10
    assert_operator site["confidence"], :>=, 0.95
    top = site.fetch("holders").first
    assert_equal holder, top["chain"], site.inspect
    assert_operator top["share"], :>=, 0.9, site.inspect
    site
  end

  def assert_no_leak(run)
    refute_match(/^fathom: LEAK /, run.log, "#{run.name} (#{run.mode}): a leak was announced")
    refute_match(/^fathom: GROWTH OUTSIDE RUBY/, run.log, "#{run.name} (#{run.mode})")
    assert_operator run.files.size, :>=, 30
    doc, status = leaks(run.files)
    assert_equal 0, status, "#{run.name} (#{run.mode}): #{leak_sites(doc).map { |s| s["label"] }} #{doc["processes"].first["process"]}"
    assert_empty leak_sites(doc)
    refute doc["leak_found"]
    doc
  end

  def site(doc, label)
    doc["processes"].first["sites"].find { |s| s["label"] == label } or flunk("no site #{label}")
  end

  # ---- the steady and double leaks: within 10 windows, site and holder

  def test_steady_leak_found_within_ten_windows_with_its_holder
    run = run_of("steady")
    site = assert_found_early(run, site_line("steady"), "Steady::CACHE (Array)", "String")
    # Exact: 200 strings of ~1 kB a window (1,000 bytes of text, a 40-byte slot and the buffer's rounding).
    per_window = site["growth"] / (site["windows"] - 1)
    assert_in_delta 200 * 1041, per_window, 200 * 1041 * 0.05, site.inspect
    doc, status = leaks(run.files)
    assert_equal 3, status
    assert_equal [site_line("steady")], leak_sites(doc).map { |s| s["label"] }, "one leak, no other"
  end

  def test_double_leak_found_within_ten_windows_each_with_its_holder
    run = run_of("double")
    assert_found_early(run, site_line("double-sessions"), "Sessions::STORE (Hash)", "String")
    assert_found_early(run, site_line("double-registry"), "$registry (Array)", "Array")
    doc, = leaks(run.files)
    assert_equal [site_line("double-registry"), site_line("double-sessions")].sort, leak_sites(doc).map { |s| s["label"] }.sort
  end

  def test_sampled_steady_leak_found_within_ten_windows
    run = run_of("steady", :sampled)
    assert_found_early(run, site_line("steady"), "Steady::CACHE (Array)", "String")
  end

  # ---- the slow leak: within 30 windows

  def test_slow_leak_found_within_thirty_windows
    run = run_of("slow")
    windows, confidence, line = logged_leak(run, site_line("slow"))
    refute_nil windows, run.log
    assert_operator windows, :<=, 30, line
    assert_operator confidence, :>=, 95.0
    assert_includes line, "held by Slow::GROWING (Array)"
    refute_match(/^fathom: GROWTH OUTSIDE RUBY/, run.log)
    doc, status = leaks(run.files.first(30))
    assert_equal 3, status
    assert_equal [site_line("slow")], leak_sites(doc).map { |s| s["label"] }
    # 40 kB a window against a heap of over 20 MB: 0.2% of it.
    heap = doc["processes"].first["sites"].sum { |s| s["bytes"] }
    assert_operator 40 * 1041 / heap.to_f, :<=, 0.0025
  end

  # ---- no verdict for what does not leak, in either mode

  def test_plateau_is_never_a_leak
    doc = assert_no_leak(run_of("plateau"))
    assert_equal "levelling_off", site(doc, site_line("plateau"))["kind"]
    assert_large_sites_bounded(assert_no_leak(run_of("plateau", :sampled)))
  end

  def test_lru_is_never_a_leak
    doc = assert_no_leak(run_of("lru"))
    refute_equal "growing", site(doc, site_line("lru"))["kind"]
    assert_large_sites_bounded(assert_no_leak(run_of("lru", :sampled)))
  end

  def test_batch_is_never_a_leak
    doc = assert_no_leak(run_of("batch"))
    assert_equal "periodic", site(doc, site_line("batch"))["kind"]
    assert_large_sites_bounded(assert_no_leak(run_of("batch", :sampled)))
  end

  # The sampled bound above counts the sites that could pass the byte
  # threshold at all.
  def assert_large_sites_bounded(doc)
    large = doc["processes"].first["sites"].count { |s| s["bytes"] >= THRESHOLD / 2 }
    assert_operator large, :<=, MAX_LARGE_SITES
  end

  # ---- the native leak: growth outside Ruby objects, no site blamed

  def test_native_leak_is_growth_outside_ruby_objects
    run = run_of("native")
    refute_match(/^fathom: LEAK /, run.log, "a Ruby site was blamed for C's malloc")
    assert_match(/^fathom: GROWTH OUTSIDE RUBY  RSS \+\d/, run.log)
    doc, status = leaks(run.files)
    assert_equal 3, status
    assert_empty leak_sites(doc), "no Ruby site blamed"
    process = doc["processes"].first["process"]
    assert_equal "outside_ruby", process["kind"]
    # 1 MB a window for 30 windows, in RSS and malloc's in-use bytes; Ruby objects flat.
    assert_operator process["rss_growth"], :>=, 20 << 20
    assert_operator process["malloc_growth"], :>=, 20 << 20
    assert_operator process["ruby_growth"].abs, :<, 2 << 20
    out = StringIO.new
    Fathom::CLI.new(stdout: out, stderr: StringIO.new).run(["leaks", *run.files])
    assert_match(/GROWTH OUTSIDE RUBY  RSS \+[\d.]+ MB .*; Ruby objects [+-][\d.]+ [kMB]*B; malloc in use \+[\d.]+ MB: growth outside Ruby objects/, out.string)
  end
end
