# frozen_string_literal: true

require "test_helper"
require "monitor"

# Which holder names an object in a retention snapshot. Stacks hold things
# for a moment — a C function's locals (the conservative machine_context
# root), a thread's VM stack, another thread's C stack — while a constant,
# ivar or global is what owns them. An object reachable from both must be
# named by its owner, and a stack must still name what it alone holds.
class RetentionOwnerTest < Minitest::Test
  module Store
    SESSIONS = { "session-1" => "payload" }
  end

  OWNER = /\Avm → .*RetentionOwnerTest::Store::SESSIONS \(Hash\)\z/

  # A Logger-like global whose Monitor a request thread holds: the
  # Monitor's owner field points at that thread's fiber.
  Product = Struct.new(:name, :description)
  LOG = Struct.new(:mon).new(Monitor.new)

  def setup
    require_native!
  end

  def path_and_roots(stats)
    [stats[:focus_paths].first, stats[:focus_roots].first]
  end

  # Acceptance: the hash sits in a local of a live C frame (ObjectSpace.
  # each_object passes each object to the block through rb_yield's
  # argument, a C stack slot, for as long as the block runs), and the
  # snapshot sees that conservative root holding it; the constant still
  # names it. The block's own parameter is cleared, so no VM stack slot
  # holds the hash.
  def test_the_constant_names_a_hash_a_c_frame_also_holds
    stats = nil
    ObjectSpace.each_object(Hash) do |h|
      next unless h.equal?(Store::SESSIONS)

      h = nil # the VM stack must not hold it
      stats = Fathom.retention_snapshot(focus: [Store::SESSIONS], progress: nil).stats
      break
    end
    path, roots = path_and_roots(stats)
    assert_includes roots, "machine_context", "the C stack slot must hold the hash for this test to mean anything"
    assert_equal 1, path.size, path.inspect # reachable from two roots: only the super-root dominates it
    assert_match OWNER, path.first
  end

  # Iterating the hash puts it on the VM stack (the C method's receiver)
  # and in the C method's locals: still named by the constant, not by the
  # thread whose stack holds it for the moment.
  def test_the_constant_names_a_hash_being_iterated
    stats = nil
    Store::SESSIONS.each_key { stats = Fathom.retention_snapshot(focus: [Store::SESSIONS], progress: nil).stats }
    path, = path_and_roots(stats)
    assert_match OWNER, path.last, path.inspect
    refute_match(/Thread|machine_context/, path.join(" | "))
  end

  # Another thread's stacks (its VM stack, and its C stack, scanned
  # conservatively) are references of its Thread object: also not an owner.
  def test_the_constant_names_a_hash_another_thread_iterates
    started = Queue.new
    thread = Thread.new { Store::SESSIONS.each_key { started << true; sleep } }
    started.pop
    path, = path_and_roots(Fathom.retention_snapshot(focus: [Store::SESSIONS], progress: nil).stats)
    assert_match OWNER, path.last, path.inspect
    refute_match(/Thread|machine_context/, path.join(" | "))
  ensure
    thread&.kill&.join
  end

  # What only the C stack holds is still named through it. Kernel#catch
  # without an argument makes its tag object in C and keeps it in a C
  # struct on the stack (to match a throw); the block's parameter is
  # cleared, so nothing else holds it.
  def test_an_object_only_a_c_frame_holds_is_named_by_machine_context
    stats = nil
    catch do |tag|
      id = tag.__id__
      tag = nil # the VM stack must not hold it
      # Passed straight into the focus array, whose references the
      # snapshot ignores: a local holding it would be a VM stack slot.
      stats = Fathom.retention_snapshot(focus: [ObjectSpace._id2ref(id)], progress: nil).stats
    end
    path, roots = path_and_roots(stats)
    assert_equal ["machine_context"], roots
    assert_equal ["(root: machine_context)", "in machine_context (Object)"], path
  end

  # The same rule in "why are the top live sites alive": the sampled
  # sessions are named through the constant while another thread is busy
  # with the hash that holds them.
  def test_explain_sites_names_the_constant_while_a_thread_holds_the_hash
    store = {}
    Store.const_set(:LIVE, store)
    started = Queue.new
    thread = nil
    fill = "#{File.basename(__FILE__)}:#{__LINE__ + 2}"
    profiles = Fathom.profile(mode: %i[heap retention], exact: true) do
      200.times { |i| store["s#{i}"] = Array.new(4) { "x" * 64 } }
      thread = Thread.new { store.each_key { started << true; sleep } }
      started.pop
    end
    # The arrays, their strings and the hash's keys (not the thread's
    # objects, nor the VM's internal ones made on that line).
    sites = profiles[:retention].stats[:sites].select { |s| s[:site].end_with?(fill) }
    paths = sites.flat_map { |s| s[:paths].map(&:first) }.select { |p| p.last.end_with?("(Array)", "(String)") }
    refute_empty paths, profiles[:retention].stats[:sites].inspect
    paths.each do |path|
      # The hash's frame, or (for a key, which the hash does not dominate)
      # the hops that lead through it.
      assert_match(/\Avm → .*RetentionOwnerTest::Store::LIVE( \(Hash\)\z| → )/, path.first, path.inspect)
      refute_match(/Thread|machine_context/, path.join(" | "))
    end
  ensure
    thread&.kill&.join
    Store.send(:remove_const, :LIVE) if Store.const_defined?(:LIVE, false)
  end

  # A request thread holds LOG's Monitor (as Rails' logger does while a
  # request logs) while its stack holds the request's records. The
  # Monitor's owner field references the thread's fiber, and the walk used
  # to reach that fiber through LOG before the thread's own stack edges
  # (deferred), so the records read "LOG → .mon → via Monitor (Fiber) →
  # via Fiber (Array)" on 3.3. They must be named through the thread.
  # `in_fiber`: the request runs in a fiber of its own (Async/Falcon
  # style), the lock's owner is then that fiber, the thread's current one.
  def request_holding_the_lock(name, in_fiber: false)
    ready = Queue.new
    release = Queue.new
    thread = Thread.new do
      Thread.current.name = name
      request = lambda do
        LOG.mon.synchronize do
          records = Array.new(2000) { |i| Product.new("p#{i}", "d" * 100) }
          # Ids, not the objects: nothing but this stack may hold them.
          ready << [records.first.__id__, records[1000].__id__, records.last.__id__]
          release.pop
          records.size
        end
      end
      in_fiber ? Fiber.new(&request).resume : request.call
    end
    ids = ready.pop
    yield ids
  ensure
    release << true
    thread&.join
  end

  def assert_named_by_the_thread(paths, name)
    paths.each do |path|
      chain = path.join(" | ")
      assert_includes chain, "thread \"#{name}\"", path.inspect
      refute_match(/LOG|Monitor|machine_context/, chain)
      assert_match(/\(RetentionOwnerTest::Product\)\z/, path.last)
    end
  end

  def test_a_request_threads_records_are_named_by_the_thread_not_the_lock_it_holds
    request_holding_the_lock("request-1") do |ids|
      assert LOG.mon.mon_locked?, "the request must hold the monitor for this test to mean anything"
      refute LOG.mon.mon_owned?
      profile = Fathom.retention_snapshot(focus: ids.map { |id| ObjectSpace._id2ref(id) }, progress: nil)
      assert_named_by_the_thread(profile.stats[:focus_paths], "request-1")
      # And in the profile itself: every record's stack goes through the
      # thread, none through LOG.
      pprof = Fathom::Pprof.read(profile.bytes)
      objects = pprof.sample_type_index("inuse_objects")
      records = pprof.samples.map { |s| [pprof.stack_names(s), s.values[objects]] }
                     .select { |names, _| names.first.end_with?("(RetentionOwnerTest::Product)") }
      assert_equal 2000, records.sum { |_, n| n }, records.inspect
      records.each do |names, _|
        assert_includes names.join(" | "), "thread \"request-1\"", names.inspect
        refute_match(/LOG|Monitor/, names.join(" | "))
      end
    end
  end

  def test_records_of_a_request_running_in_a_fiber_are_named_by_its_thread
    request_holding_the_lock("request-2", in_fiber: true) do |ids|
      assert LOG.mon.mon_locked?
      profile = Fathom.retention_snapshot(focus: ids.map { |id| ObjectSpace._id2ref(id) }, progress: nil)
      assert_named_by_the_thread(profile.stats[:focus_paths], "request-2")
    end
  end
end
