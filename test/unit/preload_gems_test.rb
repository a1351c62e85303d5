# frozen_string_literal: true

require "test_helper"

# Preloaded (`fathom run`, RUBYOPT=-rfathom/setup), Fathom runs before the
# program's `require "bundler/setup"`: a default gem it activated then
# (securerandom, json, zlib, ...) in Ruby's own version makes Bundler refuse
# a Gemfile.lock that pins another ("You have already activated
# securerandom 0.1.1, but your Gemfile requires securerandom 0.4.1": a
# Rails 7.2 app did not boot under `fathom run`). lib/fathom/files/stdlib.rb.
class PreloadGemsTest < Minitest::Test
  PROBE = 'puts Gem.loaded_specs.keys.sort.join(",")'

  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-preload")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def gems(env, *cmd)
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV.merge(env), *cmd)
    assert status.success?, err
    out.lines.last.to_s.strip.split(",")
  end

  def baseline
    gems({}, RbConfig.ruby, "-e", PROBE)
  end

  def test_fathom_run_activates_no_gem_before_the_program_runs
    # Every mode, all started before the program's first line.
    activated = gems({}, RbConfig.ruby, "-I#{TestHelper::LIB}", TestHelper::EXE, "run", "--mode", "cpu,gc,heap",
                     "-o", File.join(@dir, "run"), "--", RbConfig.ruby, "-e", PROBE)
    assert_equal [], activated - baseline
  end

  def test_always_on_setup_activates_no_gem
    env = { "FATHOM_DIR" => @dir, "FATHOM_MODE" => "heap,gc", "RUBYOPT" => "-I#{TestHelper::LIB} -rfathom/setup" }
    assert_equal [], gems(env, RbConfig.ruby, "-e", PROBE) - baseline
  end

  def test_require_fathom_activates_no_gem
    assert_equal [], gems({}, RbConfig.ruby, "-I#{TestHelper::LIB}", "-rfathom", "-e", PROBE) - baseline
  end
end
