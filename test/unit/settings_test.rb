# frozen_string_literal: true

require "test_helper"
require "fathom/always_on/settings"
require "fathom/always_on/always_on"

# FATHOM_* settings from any env-like Hash: fathom/setup used to swap out
# the whole ENV (ENV.replace) so that autorun's parser, which read ENV,
# would read a test's Hash.
class SettingsTest < Minitest::Test
  def test_profilers_options_from_a_hash
    env = { "FATHOM_EXACT" => "1", "FATHOM_INTERVAL" => "5ms", "FATHOM_MAX_DEPTH" => "32", "FATHOM_COALESCE" => "0",
            "FATHOM_GC_SOURCE" => "hooks", "FATHOM_FORMAT" => "firefox", "FATHOM_STRING_CONTENTS" => " " }
    assert_equal({ exact: true, interval: "5000000ns", max_depth: 32, coalesce: 0, gc_source: :hooks, format: :firefox },
                 Fathom::AlwaysOn::Settings.profilers(%i[heap gc], env))
    assert_equal({ interval: "5000000ns", max_depth: 32, format: :firefox }, Fathom::AlwaysOn::Settings.profilers(%i[wall], env))
    assert_equal({}, Fathom::AlwaysOn::Settings.profilers(%i[retention], {}), "unset and blank variables leave the defaults")
  end

  def test_errors_name_the_variable
    e = assert_raises(ArgumentError) { Fathom::AlwaysOn::Settings.profilers(%i[heap], { "FATHOM_INTERVAL" => "1ns" }) }
    assert_includes e.message, "FATHOM_INTERVAL"
    e = assert_raises(ArgumentError) { Fathom::AlwaysOn::Settings.always_on({ "FATHOM_DIR" => " " }) }
    assert_includes e.message, "FATHOM_DIR"
    e = assert_raises(ArgumentError) { Fathom::AlwaysOn::Settings.always_on({ "FATHOM_DIR" => "/tmp/x", "FATHOM_KEEP_MB" => "lots" }) }
    assert_includes e.message, "FATHOM_KEEP_MB"
  end

  def test_always_on_options_from_a_hash_leave_env_alone
    env = { "FATHOM_DIR" => "/tmp/fathom-settings", "FATHOM_MODE" => "heap,gc", "FATHOM_EVERY" => "2s",
            "FATHOM_KEEP" => "7", "FATHOM_KEEP_MB" => "3", "FATHOM_COALESCE" => "20ms" }
    before = ENV.to_h
    assert_equal({ modes: %i[heap gc], dir: "/tmp/fathom-settings", every: "2000000000ns", keep_files: 7, keep_mb: 3,
                   coalesce: "20000000ns" }, Fathom::AlwaysOn::Settings.always_on(env))
    assert_equal before, ENV.to_h
  end

  def test_nothing_swaps_env
    lib = File.join(TestHelper::LIB, "**", "*.rb")
    assert_empty Dir[lib].select { |f| File.read(f).include?("ENV.replace") }
  end
end
