# frozen_string_literal: true

require "test_helper"
require "support/rails_app"
require "support/pprof_raw"
require "support/firefox_format"

# `fathom run -- bin/rails runner ./script/render_loop.rb` on the suite's
# Rails app (test/rails_app), in every mode and both formats, each file read
# back by the reader people use: `go tool pprof` with its default flags, and
# Fathom's own report. Rails sets Encoding.default_internal to UTF-8, which
# once made every profile write fail (the file was not opened in binary).
class FathomRunRailsTest < Minitest::Test
  def setup
    require_native!
    RailsApp.require!(self)
    @dir = Dir.mktmpdir("fathom-rails-run")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def run_rails(*fathom_args)
    out, err, status = RailsApp.fathom_run([*fathom_args], %w[runner ./script/render_loop.rb])
    assert status.success?, "fathom run failed:\n#{err}"
    assert_match(/rendered 4 pages/, out)
    assert_match(/default_internal=#<Encoding:UTF-8>/, out, "Rails sets Encoding.default_internal")
    refute_match(/could not write/, err)
    err
  end

  # What `go tool pprof -top` prints with its default flags (no
  # -symbolize=none), over every sample type the file has.
  def pprof_top(path)
    go_pprof("-top", "-nodecount=400", path)
  end

  def test_pprof_in_every_mode
    skip_unless_tool("go", "apt-get install golang-go")
    out = File.join(@dir, "run")
    run_rails("--mode", "cpu,gc,heap,retention", "-o", out)
    assert_equal %w[run.cpu.pb.gz run.gc.pb.gz run.heap.pb.gz run.retention.pb.gz], Dir.children(@dir).sort

    # The page's work is in the profiles, by the names Rails gives it. The
    # run (boot and 4 pages) takes ~1.4 s of CPU; at 10 ms, ~145 samples,
    # 52-62 of them under the _product partial (3 runs): P(none) is below
    # 0.6^140.
    # Not ProductsController#index: the action itself only runs the query
    # (the views render under default_render, after it returns), 1-4
    # samples in 3 runs, so a profile without it is a matter of chance;
    # test_wall_pprof finds it by the clock.
    cpu = PprofRaw.read(File.join(@dir, "run.cpu.pb.gz"))
    assert_operator cpu.cum(cpu.sample_types.first, /_app_views_products__product_html_erb/), :>, 0,
                    cpu.function_names.first(40)
    # Heap (alloc_space: in-use is mostly the boot): each page allocates ~0.7M objects; bursts every
    # 10 ms of Ruby CPU, >= 40 of them, each keeping 64 candidates with
    # p ~ 1/4: P(no sample under the partial) is below e^-100.
    heap = PprofRaw.read(File.join(@dir, "run.heap.pb.gz"))
    partial = heap.function_names.grep(/_app_views_products__product_html_erb/)
    refute_empty partial, "the _product partial allocates: #{heap.function_names.first(40)}"
    # What pprof's -top shows of the page: the partial (its P(no sample) is
    # above). Not ProductsController#index: the action itself only runs the
    # query (views render under default_render, after it returns), ~4% of
    # a page's allocations, which pprof's default node fraction dropped in
    # a CI run on 3.1 and which a sample misses with P ~ e^-13.
    top = go_pprof("-top", "-nodefraction=0", "-nodecount=4000", "-sample_index=alloc_space",
                   File.join(@dir, "run.heap.pb.gz"))
    assert_match(/_app_views_products__product_html_erb/, top)
    %w[cpu gc retention].each do |mode|
      text = pprof_top(File.join(@dir, "run.#{mode}.pb.gz"))
      assert_match(/Showing nodes|flat%/, text, "#{mode}: #{text}")
    end
    # Fathom's own reader agrees.
    report = Fathom::Profile.load(File.join(@dir, "run.gc.pb.gz")).report
    assert_match(/GC/, report)
  end

  def test_wall_pprof
    skip_unless_tool("go", "apt-get install golang-go")
    out = File.join(@dir, "wall.pb.gz")
    run_rails("--mode", "wall", "-o", out)
    # The action itself only runs the query (views render under
    # default_render): 3-4 wall samples under it in 3 runs of 4 pages, most
    # of them the first page's cold query (schema, connection), one stretch
    # of >= 30 ms; wall time is sampled by the clock, not by luck. A wall
    # profile also holds the boot and the connection reaper's sleep, so
    # pprof's default -top drops nodes under 0.5% of the total, which this
    # one can be on a loaded machine (seen in CI): -nodefraction=0 lists it.
    wall = PprofRaw.read(out)
    assert_operator wall.cum(wall.sample_types.first, "ProductsController#index"), :>, 0, wall.function_names.first(40)
    top = go_pprof("-top", "-nodefraction=0", "-nodecount=4000", out)
    assert_match(/ProductsController#index/, top)
  end

  def test_firefox_combined_and_cpu
    out = File.join(@dir, "shop.json.gz")
    err = run_rails("--mode", "cpu,gc,heap", "--format", "firefox", "-o", out)
    assert_match(/wrote cpu\+gc\+heap profile/, err)
    json = JSON.parse(Zlib.gunzip(File.binread(out)))
    FirefoxFormat.check!(json)
    main = json["threads"].find { |t| t["name"] == "main" } or flunk(json["threads"].map { |t| t["name"] }.inspect)
    names = main["funcTable"]["name"].map { |i| main["stringArray"][i] }
    assert_includes names, "ProductsController#index"
    assert json["threads"].any? { |t| t["name"] == "Garbage Collection" }
    assert_match(/cpu\+gc\+heap profile/, Fathom::Profile.load(out).report)

    wall = File.join(@dir, "wall.json.gz")
    run_rails("--mode", "wall", "--format", "firefox", "-o", wall)
    FirefoxFormat.check!(JSON.parse(Zlib.gunzip(File.binread(wall))))
  end
end
