# frozen_string_literal: true

require "test_helper"

# The test servers (test/support/rails_app.rb, rack_server.rb) send stdout and
# stderr into one log, and tests read both from it: puma's "Worker booted"
# lines (stdout) and fathom's notices (stderr), from the master and from
# forked workers. `out: log, err: log` opened the file twice, with two
# offsets, and one stream overwrote the other (a CI run lost a worker's
# "profiles sent" line). TestHelper.log_file must keep every line.
class ServerLogFileTest < Minitest::Test
  CHILD = <<~'RUBY'
    $stdout.sync = true
    5.times do |i|
      puts "out #{i}"
      $stderr.puts "err #{i}"
      pid = fork { puts "child out #{i}"; $stderr.puts "child err #{i}" }
      Process.wait(pid)
    end
  RUBY

  def test_both_streams_of_a_process_and_its_forks_reach_the_log
    Dir.mktmpdir("fathom-log") do |dir|
      log = File.join(dir, "server.log")
      File.write(log, "a previous run's text\n" * 20)
      pid = Process.spawn(RbConfig.ruby, "-e", CHILD, %i[out err] => TestHelper.log_file(log))
      Process.wait(pid)
      assert_predicate $?, :success?
      lines = File.readlines(log, chomp: true)
      expected = 5.times.flat_map { |i| ["out #{i}", "err #{i}", "child out #{i}", "child err #{i}"] }
      assert_equal expected, lines, "the log starts empty and keeps every line, in order"
    end
  end
end
