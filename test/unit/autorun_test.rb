# frozen_string_literal: true

require "test_helper"
require "fathom/autorun" # does nothing here: FATHOM_PID is not this process

class AutorunTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("fathom-autorun")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_path_with_pid
    p = Fathom::Files::OutputPaths
    assert_equal "/x/heap.42.pb.gz", p.with_pid("/x/heap.pb.gz", 42)
    assert_equal "/x/profile.42.out", p.with_pid("/x/profile.out", 42)
    assert_equal "/x/prof.42", p.with_pid("/x/prof", 42)
    assert_equal "/x.y/prof.42", p.with_pid("/x.y/prof", 42)
  end

  def test_not_loaded_in_unrelated_processes
    refute Fathom::Autorun.target_process?
  end

  def test_bad_settings_are_reported_and_the_program_still_runs
    env = { "FATHOM_PID" => nil, "FATHOM_INTERVAL" => "soon", "FATHOM_OUT" => File.join(@dir, "h.pb.gz") }
    script = 'ENV["FATHOM_PID"] = Process.pid.to_s; require "fathom/autorun"; puts "program ran"; exit 4'
    out, err, status = Open3.capture3(env, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", script)
    assert_equal 4, status.exitstatus
    assert_equal "program ran\n", out
    assert_match(/fathom: could not start profiling; the program runs unprofiled: .*FATHOM_INTERVAL must be/, err)
  end

  # --- with the extension: the whole `fathom run` path --------------------

  def run_program(script, *args)
    path = File.join(@dir, "prog.rb")
    File.write(path, script)
    out = File.join(@dir, "heap.pb.gz")
    _, err, status = TestHelper.run_fathom("run", "--exact", "-o", out, "--", RbConfig.ruby, path, *args, chdir: @dir)
    [out, err, status]
  end

  def test_no_census_reaches_the_heap_profiler
    require_native!
    path = File.join(@dir, "prog.rb")
    File.write(path, "KEPT = Array.new(1000) { 'x' * 100 }\n")
    out = File.join(@dir, "heap.pb.gz")
    _, err, status = TestHelper.run_fathom("run", "--no-census", "-o", out, "--", RbConfig.ruby, path, chdir: @dir)
    assert status.success?, err
    comments = Fathom::Pprof.read_file(out).comments.join("\n")
    assert_includes comments, "not calibrated to a heap census (census: false)"

    env = { "FATHOM_PID" => nil, "FATHOM_CENSUS" => "maybe", "FATHOM_OUT" => File.join(@dir, "h.pb.gz") }
    script = 'ENV["FATHOM_PID"] = Process.pid.to_s; require "fathom/autorun"; puts "program ran"'
    out, err, = Open3.capture3(env, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", script)
    assert_equal "program ran\n", out
    assert_match(/FATHOM_CENSUS must be true\/false/, err)
  end

  def test_writes_profile_at_exit_after_the_programs_own_at_exit
    require_native!
    out, err, status = run_program(<<~RUBY)
      class Keeper; def make = Array.new(500) { "kept" * 10 }; end
      KEPT = Keeper.new.make
      at_exit { $stderr.puts "program at_exit" }
    RUBY
    assert status.success?, err
    lines = err.lines.map(&:chomp)
    assert_equal "program at_exit", lines[-2]
    assert_match(/\Afathom: wrote heap profile to #{Regexp.escape(out)} \(\d+ samples, \d+ live\)\z/, lines[-1])
    top = Fathom::Report::Top.new(Fathom::Pprof.read_file(out), sample_index: "inuse_objects")
    assert_operator top.rows.find { |r| r.name.include?("Keeper#make") }&.cum.to_i, :>=, 500
  end

  def test_exit_status_and_profile_survive_exceptions
    require_native!
    out, err, status = run_program('KEEP = Array.new(100) { Object.new }; raise "boom"')
    assert_equal 1, status.exitstatus
    assert_match(/boom \(RuntimeError\)/, err)
    assert_match(/fathom: wrote heap profile/, err)
    assert File.exist?(out)

    _, _, status = run_program("exit 9")
    assert_equal 9, status.exitstatus
  end

  def test_forked_children_write_their_own_files
    require_native!
    out, err, status = run_program(<<~RUBY)
      pid = fork { KEPT = Array.new(200) { "child" * 5 } }
      Process.wait(pid)
      puts pid
      $stderr.puts "child=\#{pid}"
    RUBY
    assert status.success?, err
    child = err[/child=(\d+)/, 1]
    assert File.exist?(out), err
    assert File.exist?(File.join(@dir, "heap.#{child}.pb.gz")), err
  end
end
