# frozen_string_literal: true

require "test_helper"
require "fathom/process_comments"
require "fathom/files/rotation"

# fathom/setup from the environment: bad settings never stop the program.
class SetupTest < Minitest::Test
  def run_with(env, code = 'puts "ran"')
    Open3.capture3(TestHelper::PLAIN_ENV.merge("RUBYOPT" => "-I#{TestHelper::LIB} -rfathom/setup").merge(env),
                   RbConfig.ruby, "-e", code)
  end

  def test_bad_settings_are_named_and_the_program_runs_unprofiled
    require_native!
    Dir.mktmpdir do |dir|
      { { "FATHOM_DIR" => nil } => /FATHOM_DIR must name/,
        { "FATHOM_DIR" => dir, "FATHOM_MODE" => "heap,bogus" } => /FATHOM_MODE/,
        { "FATHOM_DIR" => dir, "FATHOM_MODE" => "retention" } => /cannot run always-on/,
        { "FATHOM_DIR" => dir, "FATHOM_MODE" => "cpu,wall" } => /FATHOM_MODE cpu and wall cannot be profiled together/,
        { "FATHOM_DIR" => dir, "FATHOM_EVERY" => "0" } => /FATHOM_EVERY/,
        { "FATHOM_DIR" => dir, "FATHOM_KEEP" => "0" } => /FATHOM_KEEP must be/,
        { "FATHOM_DIR" => dir, "FATHOM_KEEP_MB" => "lots" } => /FATHOM_KEEP_MB/,
        { "FATHOM_DIR" => dir, "FATHOM_INTERVAL" => "1ns" } => /FATHOM_INTERVAL/ }.each do |env, message|
        out, err, status = run_with(env)
        assert status.success?, err
        assert_equal "ran\n", out
        assert_match(message, err)
        assert_match(/not profiling/, err)
      end
      assert_empty Dir.children(dir)
    end
  end

  def test_writes_files_with_comments_and_a_last_one_at_exit
    require_native!
    Dir.mktmpdir do |dir|
      _, err, status = run_with({ "FATHOM_DIR" => dir, "FATHOM_MODE" => "gc", "FATHOM_EVERY" => "3600s" },
                                "p Fathom::AlwaysOn::Setup.profilers.keys; 3.times { GC.start }")
      assert status.success?, err
      files = Dir.children(dir) - [Fathom::Files::Rotation::LOCK_NAME] # the rotation's lock, hidden
      assert_equal 1, files.size
      profile = Fathom::Pprof.read(File.binread(File.join(dir, files.first)))
      assert_includes profile.comments, "hostname=#{Fathom::ProcessComments.hostname}"
      assert_operator profile.samples.size, :>, 0
    end
  end
end
