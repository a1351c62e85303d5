# frozen_string_literal: true

require_relative "../test_helper"

# Fathom::Labels: the API, validation, nesting, restore on exception and
# thread isolation. What the samplers do with the labels is in
# test/integration/labels_profile_test.rb.
class LabelsTest < Minitest::Test
  Labels = Fathom::Labels

  def teardown
    Labels.set(nil)
    Labels.span_id = nil
  end

  def test_with_merges_restores_and_returns_the_blocks_value
    assert_equal({}, Labels.current)
    assert_predicate Labels.current, :frozen?
    result = Labels.with(endpoint: "UsersController#show") do
      assert_equal({ "endpoint" => "UsersController#show" }, Labels.current)
      Labels.with("job" => :Mailer) do
        assert_equal({ "endpoint" => "UsersController#show", "job" => "Mailer" }, Labels.current)
        Labels.with(endpoint: nil) { assert_equal({ "job" => "Mailer" }, Labels.current) }
      end
      assert_equal({ "endpoint" => "UsersController#show" }, Labels.current)
      42
    end
    assert_equal 42, result
    assert_equal({}, Labels.current)
    assert_equal 0, Fathom::Native::Labels.current_set
  end

  def test_the_native_set_follows_the_ruby_labels
    Labels.with(endpoint: "a", job: "b") do
      id = Fathom::Native::Labels.current_set
      refute_equal 0, id
      assert_equal [%w[endpoint a], %w[job b]], Fathom::Native::Labels.pairs(id)
      # The same labels in another order are the same set.
      Labels.with(job: "b") { assert_equal id, Fathom::Native::Labels.current_set }
    end
  end

  def test_with_restores_on_exception_and_throw
    assert_raises(RuntimeError) { Labels.with(endpoint: "x") { raise "boom" } }
    assert_equal({}, Labels.current)
    catch(:out) { Labels.with(endpoint: "x") { throw :out } }
    assert_equal({}, Labels.current)
    assert_equal 0, Fathom::Native::Labels.current_set
  end

  def test_set_and_restore
    token = Labels.set(endpoint: "a")
    assert_equal({ "endpoint" => "a" }, Labels.current)
    inner = Labels.set("endpoint" => "b", "job" => "c")
    assert_equal({ "endpoint" => "b", "job" => "c" }, Labels.current)
    Labels.restore(inner)
    assert_equal({ "endpoint" => "a" }, Labels.current)
    Labels.restore(token)
    assert_equal({}, Labels.current)
    Labels.set(endpoint: "a")
    Labels.set({})
    assert_equal({}, Labels.current)
    assert_equal "#<Fathom::Labels::Token>", token.inspect
    assert_raises(TypeError) { Labels.restore({ endpoint: "a" }) }
  end

  def test_fathom_with_labels_is_an_alias
    assert_equal :ok, Fathom.with_labels(endpoint: "e") { Labels.current["endpoint"] == "e" ? :ok : :bad }
  end

  def test_validation_names_the_problem
    e = assert_raises(ArgumentError) { Labels.with("bad-name" => "x") {} }
    assert_match(/bad-name/, e.message)
    %w[thread state gvl span_id __name__ __x].each do |reserved|
      e = assert_raises(ArgumentError) { Labels.set(reserved => "x") }
      assert_match(/reserved/, e.message)
    end
    assert_match(/must be a String/, assert_raises(TypeError) { Labels.set(endpoint: 1) }.message)
    assert_match(/Symbol or String/, assert_raises(TypeError) { Labels.set(1 => "x") }.message)
    assert_match(/at most 256/, assert_raises(ArgumentError) { Labels.set(endpoint: "x" * 257) }.message)
    assert_match(/empty/, assert_raises(ArgumentError) { Labels.set(endpoint: "") }.message)
    nine = (1..9).to_h { |i| ["k#{i}", "v"] }
    assert_match(/at most 8/, assert_raises(ArgumentError) { Labels.set(nine) }.message)
    eight = (1..8).to_h { |i| ["k#{i}", "v"] }
    Labels.with(eight) do
      assert_raises(ArgumentError) { Labels.with(k9: "v") {} } # nine after the merge
    end
    assert_raises(TypeError) { Labels.set("endpoint") }
    assert_raises(ArgumentError) { Labels.with(endpoint: "a") }
    assert_equal({}, Labels.current) # nothing half-applied
  end

  def test_values_are_scrubbed_to_utf8
    Labels.with(endpoint: "caf\xC3".b) do
      value = Labels.current["endpoint"]
      assert_equal Encoding::UTF_8, value.encoding
      assert_predicate value, :valid_encoding?
      assert_predicate value, :frozen?
    end
    Labels.with(endpoint: "é".encode("ISO-8859-1")) { assert_equal "é", Labels.current["endpoint"] }
  end

  def test_span_id
    assert_nil Labels.span_id
    Labels.span_id = 0x1234abcd
    assert_equal 0x1234abcd, Labels.span_id
    Labels.span_id = 2**64 - 1
    assert_equal 2**64 - 1, Labels.span_id
    Labels.span_id = nil
    assert_nil Labels.span_id
    assert_raises(ArgumentError) { Labels.span_id = 0 }
    assert_raises(ArgumentError) { Labels.span_id = 2**64 }
    assert_raises(ArgumentError) { Labels.span_id = -1 }
    assert_raises(TypeError) { Labels.span_id = "abc" }
    assert_raises(TypeError) { Fathom::Native::Labels.span_id = "abc" }
    assert_raises(ArgumentError) { Fathom::Native::Labels.span_id = 2**64 }
  end

  def test_threads_do_not_see_each_others_labels
    ready = Queue.new
    go = Queue.new
    other = Thread.new do
      Labels.with(endpoint: "other") do
        Labels.span_id = 7
        ready << [Labels.current, Fathom::Native::Labels.current_set]
        go.pop
        [Labels.current, Labels.span_id]
      end
    end
    Labels.with(endpoint: "main") do
      theirs, their_id = ready.pop
      assert_equal({ "endpoint" => "other" }, theirs)
      assert_equal({ "endpoint" => "main" }, Labels.current)
      refute_equal their_id, Fathom::Native::Labels.current_set
      assert_nil Labels.span_id
      go << true
      assert_equal [{ "endpoint" => "other" }, 7], other.value
    end
    # A new thread starts with none (Ruby 3.1 may give it the native thread
    # of one that ended with labels set: the THREAD_END hook cleared them).
    Thread.new { Labels.set(endpoint: "left behind") }.join
    assert_equal [{}, 0, nil], Thread.new { [Labels.current, Fathom::Native::Labels.current_set, Labels.span_id] }.value
  end

  # Issue 40, item 12: Ruby 3.1 fires no THREAD_END hook for a thread ended
  # by an exception, Thread#kill or Thread#exit, and its thread cache gives
  # the ended thread's native thread (where the labels live) to the next
  # Ruby thread: that thread's samples carried the dead one's endpoint.
  # Each way to end is tried until the next thread got the same native
  # thread (at once on 3.1, every time seen; 3.3 and 3.4 have no cache, so
  # there the new thread's words start at zero anyway).
  def test_no_thread_passes_its_labels_on_however_it_ends
    deaths = {
      "raise" => -> { raise "boom" },
      "kill" => -> { Thread.current.kill },
      "exit" => -> { Thread.exit },
      "throw" => -> { throw :nowhere },
      "return" => -> {},
    }
    reused = deaths.keys.select do |how|
      20.times.any? do
        ids = Queue.new
        dead = Thread.new do
          Thread.current.report_on_exception = false
          Labels.set(endpoint: "dead by #{how}")
          Labels.span_id = 42
          ids << Thread.current.native_thread_id
          deaths.fetch(how).call
        end
        dead.join rescue nil # rubocop:disable Style/RescueModifier -- how it ended is the point, not what it raised
        sleep 0.01 # its native thread goes back to 3.1's cache
        id, set, span = Thread.new { [Thread.current.native_thread_id, Fathom::Native::Labels.current_set, Labels.span_id] }.value
        assert_equal [0, nil], [set, span], "a thread ended by #{how} passed its labels on"
        id == ids.pop
      end
    end
    assert_equal deaths.keys, reused, "Ruby 3.1 reuses an ended thread's native thread" if RUBY_VERSION.start_with?("3.1.")
  end

  def test_native_rejects_unknown_ids_and_bad_pairs
    assert_raises(ArgumentError) { Fathom::Native::Labels.current_set = 123_456 }
    assert_raises(TypeError) { Fathom::Native::Labels.intern([["a", 1]]) }
    assert_raises(TypeError) { Fathom::Native::Labels.intern("a") }
  end

  # An integration calling Labels.with must not break an app where the
  # extension did not load: labels are then kept on the Ruby side only.
  def test_without_the_extension_labels_are_kept_in_ruby
    script = <<~RUBY
      ENV["FATHOM_EXT_PATH"] = "/nonexistent/fathom_ext.so"
      require "fathom"
      raise "extension loaded" if Fathom::NativeLoader.available?
      p [Fathom::Labels.with(endpoint: "a") { Fathom::Labels.current }, Fathom::Labels.current,
         (Fathom::Labels.span_id = 5), Fathom::Labels.span_id]
    RUBY
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB, "-e", script)
    assert status.success?, err
    assert_equal [{ "endpoint" => "a" }, {}, 5, nil], eval(out) # rubocop:disable Security/Eval
  end

  # In a child process: the table is per process and bounded, so filling it
  # here would leave later tests in this process only "(other)".
  def test_distinct_sets_are_bounded_and_overflow_to_other
    script = <<~RUBY
      require "fathom"
      max = Fathom::Labels.stats[:max_sets]
      (max + 500).times { |i| Fathom::Labels.with(endpoint: "/users/\#{i}") { } }
      ids = Fathom::Labels.with(endpoint: "/users/999999") { Fathom::Native::Labels.current_set }
      kept = Fathom::Labels.with(endpoint: "/users/0") { Fathom::Native::Labels.pairs(Fathom::Native::Labels.current_set) }
      p [Fathom::Labels.stats, Fathom::Native::Labels.pairs(ids), kept,
         Fathom::Labels.with(endpoint: "/users/999999") { Fathom::Labels.current }]
    RUBY
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB, "-e", script)
    assert status.success?, err
    stats, overflow_pairs, kept, current = eval(out) # rubocop:disable Security/Eval
    assert_equal 1024, stats[:max_sets]
    assert_equal 1024, stats[:sets]
    assert_equal 501, stats[:overflowed]
    assert_equal [%w[endpoint (other)]], overflow_pairs
    assert_equal [%w[endpoint /users/0]], kept # sets interned before the bound keep their values
    assert_equal({ "endpoint" => "/users/999999" }, current) # Labels.current still says what was set
  end
end
