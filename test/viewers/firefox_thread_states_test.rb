# frozen_string_literal: true

require "test_helper"
require "json"
require "zlib"
require "support/firefox_viewer"
require "support/nogvl_burn"

# Four threads in four states (test/fixtures/cpu_thread_states.rb: Ruby code,
# C without the GVL, asleep, blocked on a pipe, the last two since before
# the profiler started; the main thread allocates, so GCs run), written as a
# wall profile in the Firefox format and opened in the real Firefox Profiler
# in headless Chromium: what a person sees of each thread's state.
class FirefoxThreadStatesTest < Minitest::Test
  FIXTURE = File.join(TestHelper::ROOT, "test/fixtures/cpu_thread_states.rb")
  OUT = File.join(TestHelper::ROOT, "tmp/viewers/thread-states.json.gz")
  TRUTH = File.join(TestHelper::ROOT, "tmp/viewers/thread-states-truth.json")

  include FirefoxViewer::Reading

  def self.result
    BrowserRun.once(self) do
      FileUtils.rm_f(TRUTH)
      threads, view = FirefoxViewer.profile_and_view(OUT, name: "thread-states") do
        _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB,
                                         "-I", NoGvlBurn.load_path, FIXTURE,
                                         "wall", "firefox", OUT, TRUTH, "1.5")
        raise "fixture failed: #{err}" unless status.success?
      end
      [threads, view, JSON.parse(File.read(TRUTH))]
    end
  end

  def setup
    require_native!
    FirefoxViewer.require!(self)
    @file_threads, @view, @truth = self.class.result
  end

  def test_every_thread_has_its_track
    %w[main burner nogvl sleeper reader].each { |name| track(name) }
    assert_empty @view["page_errors"]
    assert_empty @view["console_errors"]
    assert_operator @truth["gc_count"], :>, 0
    # A wall profile too: no track hatched as an empty buffer (the sleeper
    # has one long sample at its end).
    @view["tracks"].each do |t|
      assert_empty t["empty_regions"].select { |r| r["kind"] == "EmptyBuffer" && r["width_px"] > 0 }, "#{t["name"]}: #{t["empty_regions"]}"
    end
  end

  # C code without the GVL burns a core: the graph shows it.
  def test_the_c_without_gvl_threads_activity_graph_is_not_empty
    comp = track("nogvl")
    sidebar = thread_view("nogvl")["sidebar_text"]
    assert_operator comp["activity_pixels"], :>, 0, "nogvl's activity graph is empty; sidebar: #{sidebar}"
    assert_match(/Running without GVL \d/, sidebar)
    assert_includes thread_view("nogvl")["calltree_text"], "FathomTest::NoGvl.burn"
  end

  # Ruby's GC stops only threads that hold or want the GVL: a thread asleep
  # or blocked on a pipe shows no GC time, and its own call.
  def test_threads_that_only_wait_show_no_garbage_collection
    { "sleeper" => "Kernel#sleep", "reader" => "IO#read" }.each do |name, call|
      tree = thread_view(name)["calltree_text"]
      refute_includes tree, "Garbage Collection", "#{name}'s call tree"
      refute_includes tree, "stack not read", "#{name}'s call tree"
      assert_includes tree, call, "#{name}'s call tree"
      assert_match(/Blocked \/ sleeping (100|9\d)/, thread_view(name)["sidebar_text"], "#{name}'s sidebar")
    end
  end
end
