# frozen_string_literal: true

require "test_helper"

# Fathom.notice: Fathom's messages never raise, whatever the program did to
# $stderr (issue 10, item 3).
class NoticeTest < Minitest::Test
  def with_stderr(io)
    saved = $stderr
    $stderr = io
    yield
  ensure
    $stderr = saved
  end

  def dropped
    Fathom::Notice.dropped
  end

  def test_prints_to_the_current_stderr_with_a_newline
    io = StringIO.new
    with_stderr(io) { assert Fathom.notice("fathom: hello") }
    assert_equal "fathom: hello\n", io.string
  end

  def test_a_closed_stderr_drops_the_message
    io = StringIO.new
    io.close
    before = dropped
    with_stderr(io) { refute Fathom.notice("lost") }
    assert_equal before + 1, dropped
  end

  def test_a_stderr_whose_write_is_gone_or_fails_drops_the_message
    gone = Object.new
    def gone.write(*) = 0
    failing = Object.new
    def failing.write(*) = raise("boom")
    with_stderr(gone) do
      gone.singleton_class.send(:remove_method, :write) # after the assignment: Ruby checks write there
      refute Fathom.notice("lost")
    end
    with_stderr(failing) { refute Fathom.notice("lost") }
    broken_pipe = Object.new
    def broken_pipe.write(*) = raise(Errno::EPIPE)
    with_stderr(broken_pipe) { refute Fathom.notice("lost") }
  end

  def test_a_message_that_fails_to_build_is_replaced_not_raised
    io = StringIO.new
    with_stderr(io) { assert(Fathom.notice { raise ArgumentError, "bad" }) }
    assert_match(/fathom: \(a message could not be built: ArgumentError\)/, io.string)
  end

  def test_signals_and_exit_from_the_programs_own_write_still_pass
    exiting = Object.new
    def exiting.write(*) = exit(3)
    with_stderr(exiting) { assert_raises(SystemExit) { Fathom.notice("x") } }
  end

  def test_stream_is_an_io_for_progress_lines
    io = StringIO.new
    with_stderr(io) { assert_equal 6, Fathom::Notice::Stream.write("abc\n", "de") }
    assert_equal "abc\nde\n", io.string
    io.close
    with_stderr(io) { Fathom::Notice::Stream.write("lost\n") } # no raise
  end
end
