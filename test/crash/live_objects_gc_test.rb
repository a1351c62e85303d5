# frozen_string_literal: true

require "test_helper"
require "open3"

# HeapProfiler#live_objects and #live_sites hand the exact profiler's
# recorded objects to Ruby. Two ways that went wrong, each crashing Ruby
# (CI's Ruby 3.3 suite died twice in test/unit/retention_report_sources_test.rb
# with "[BUG] try to mark T_NONE object"):
#   - during a lazy sweep, an object the last marking did not reach is dead
#     but not yet freed: handed out, it was freed all the same, and the
#     next GC marked a freed slot (3 runs in 3 on Ruby 3.1 without the fix);
#   - the records include Ruby's internal objects: a method cache whose
#     class slot says String passed `String === o`, and `o.bytesize` crashed.
# ruby/heap/gc_pause.h and VisibleToRuby (ruby/heap/live_objects.cc).
class LiveObjectsGcTest < Minitest::Test
  # In a Ruby of its own: the failure is a crash.
  SCRIPT = <<~'RUBY'
    require "fathom"
    require "objspace"
    # Made in a thread of its own: once it has ended, no stack of the
    # process holds a reference (the conservative scan of the main stack
    # kept the whole array alive on Ruby 3.3).
    def garbage = Thread.new { Array.new(100_000) { "g" * 30 }.size }.join
    def types(objects) = objects.map { |o| ObjectSpace.dump(o)[/"type":"(\w+)"/, 1] }.uniq.sort.join(",")

    # An exact profiler that saw the garbage and 500 kept strings, stopped
    # (which commits every record: a record still pending at a GC keeps its
    # object alive through it), with the garbage dead but not yet freed.
    def recorded
      profiler = Fathom::HeapProfiler.new(exact: true).start
      garbage
      kept = Array.new(500) { "k" * 30 }
      profiler.stop
      GC.start(full_mark: true, immediate_sweep: false)
      [profiler, kept]
    end

    profiler, kept = recorded
    live = profiler.live_objects(limit: 1_000_000).map(&:last)
    puts "live_objects types=#{types(live)}"
    3.times { GC.start } # marks `live`: a freed slot in it is a crash
    strings = live.grep(String)
    puts "live_objects garbage=#{strings.count { |s| s.start_with?("g") }} kept=#{(strings.map(&:__id__) & kept.map(&:__id__)).size}"
    profiler.flush

    profiler, kept = recorded
    focus = []
    sites = profiler.live_sites(top: 5, per_site: 1000, focus: focus)
    puts "live_sites types=#{types(focus)}"
    3.times { GC.start }
    puts "live_sites garbage=#{focus.grep(String).count { |s| s.start_with?("g") }} sites=#{sites.size}"
    profiler.flush
    kept.size
  RUBY

  def setup
    require_native!
  end

  def test_only_live_visible_objects_are_handed_out
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", SCRIPT)
    message = "stdout:\n#{out}\nstderr:\n#{err[0, 4000]}"
    assert status.success?, "the process did not exit normally (#{status.inspect})\n#{message}"
    %w[live_objects live_sites].each do |method|
      types = out[/#{method} types=(\S*)/, 1].to_s.split(",")
      refute_empty types, message
      # No IMEMO, ICLASS, NODE, NONE: what a Ruby program can hold.
      assert_empty types - %w[ARRAY STRING OBJECT CLASS MODULE HASH DATA], "#{method}: #{message}"
      assert_equal "0", out[/#{method} garbage=(\d+)/, 1], "#{method} handed out dead objects\n#{message}"
    end
    # Every kept string (stop committed them all).
    assert_equal "500", out[/kept=(\d+)/, 1], message
  end
end
