# frozen_string_literal: true

require "test_helper"
require "support/forked_work"
require "json"
require "zlib"
require "support/fault_injection"

# Forked heap dumps (Fathom.heap_dump) while 8 threads allocate and call
# into C, as test/crash/retention_fork_test.rb does for snapshots: at fork
# time another thread may hold a malloc arena lock, be inside zlib, or wait
# for the GVL. The child must neither hang nor crash, its file must be
# whole, and it must always be reaped (docs/internals/dump.md, "Writing
# dumps: fathom dump"). Runs in the normal and the ASan/UBSan builds (rake
# test:asan), on each Ruby.
class HeapDumpForkCrashTest < Minitest::Test
  include ForkedWork

  def setup
    require_native!
    skip "no heap dumps in this build" unless Fathom::Native.respond_to?(:heap_dump_forked)
    @dir = Dir.mktmpdir("fathom-dump-crash")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # The file is whole: as many lines and bytes as the child said, ROOT
  # lines first, and its first and last 500 lines parse. (Splitting and
  # parsing all of a dump of the threads' garbage, ~500k lines, took most
  # of a minute per dump with 8 threads contending for the GVL;
  # test/integration/heap_dump_test.rb parses every line of a quiet heap.)
  def check_file(path, stats)
    text = path.end_with?(".gz") ? Zlib::GzipReader.open(path, &:read) : File.read(path)
    assert_equal stats[:lines], text.count("\n")
    assert_equal stats[:bytes], File.size(path)
    assert text.start_with?('{"type":"ROOT"'), text[0, 100]
    assert text.end_with?("}\n")
    head = text[0, 200_000].lines[0...-1].first(500)
    tail = text[-200_000..]&.lines&.drop(1)&.last(500) || []
    (head + tail).each { |l| assert_kind_of String, JSON.parse(l)["type"] }
    assert_operator text.scan('"type":"HASH"').size, :>, 100
  end

  def test_forked_dumps_while_threads_allocate_and_call_into_c
    # Timing-free: a fixed number of dumps, each checked whole and reaped;
    # the deadline is generous so that only a real hang trips it.
    with_busy_threads do |state|
      (asan? ? 2 : 4).times do |i|
        path = File.join(@dir, "dump#{i}.json#{".gz" if i.odd?}")
        stats = Fathom.heap_dump(path, timeout: asan? ? 600 : 120, values: i == 2)
        while_paused(state) do
          assert_empty children, "the child was reaped"
          check_file(path, stats)
        end
      end
    end
    assert_empty children
    assert_empty Dir.children(@dir).grep(/fathom-tmp/), "no temp file left"
  end

  # GC.compact before and GC.stress around a dump: the parent's GC comes
  # back on at once, and the child walks a heap whose objects moved.
  def test_forked_dump_around_compaction_and_stress
    skip "GC.compact unsupported" unless GC.respond_to?(:compact)
    kept = Array.new(1000) { |i| { i => "v#{i}" } }
    GC.compact
    check_file(File.join(@dir, "a.json"), Fathom.heap_dump(File.join(@dir, "a.json")))
    GC.stress = true
    begin
      stats = Fathom.heap_dump(File.join(@dir, "b.json.gz"))
    ensure
      GC.stress = false
    end
    check_file(File.join(@dir, "b.json.gz"), stats)
    assert GC.enable == false, "GC is enabled again in the parent"
    assert_empty children
    kept.size
  end

  # A thread killed while it waits for the child: the child is killed and
  # reaped, the temp file removed, and the next dump works.
  def test_killing_the_waiting_thread_ends_the_child
    path = File.join(@dir, "killed.json")
    t = Thread.new { Fathom.heap_dump(path) }
    Thread.pass until t.stop? || !t.alive? # waiting without the GVL, or already done
    t.kill.join
    assert_empty children, "the child was killed and reaped"
    assert_empty Dir.children(@dir).grep(/fathom-tmp/), "the temp file was removed"
    stats = Fathom.heap_dump(File.join(@dir, "after.json"))
    check_file(File.join(@dir, "after.json"), stats)
  end
end

# The wait made to fail (FATHOM_INJECT_FAULT, sanitizer build only): the
# child is killed and reaped, the exception reaches Ruby, no temp file is
# left, and the next dump works.
class HeapDumpFaultTest < Minitest::Test
  include FaultInjection

  def test_a_failure_while_waiting_ends_the_child
    each_fault("dump_fork_wait") do |fault|
      dir = Dir.mktmpdir("fathom-dump-fault")
      begin
        result, message = run_with_fault(fault, <<~RUBY)
          dir = #{dir.dump}
          outcome("dump") { Fathom.heap_dump(File.join(dir, "a.json")) }
          kids = Dir["/proc/\#{Process.pid}/task/*/children"].flat_map { |f| File.read(f).split }
          puts "children=\#{kids.size}"
          puts "files=\#{Dir.children(dir).size}"
        RUBY
        assert_equal expected_error(fault), result["dump"], message
        assert_equal "0", result["children"], message
        assert_equal "0", result["files"], message
      ensure
        FileUtils.rm_rf(dir)
      end
    end
  end
end
