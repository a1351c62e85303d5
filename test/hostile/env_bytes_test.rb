# frozen_string_literal: true

require "test_helper"
require "support/env_vars"
require "fathom/always_on/settings"
require "fathom/push/push"
require "fathom/rack"
require "fathom/context/switch"

# FATHOM_* variables holding bytes that are not UTF-8 (issue 40, item 13):
# a settings error that names the variable and shows the bytes escaped
# (never a secret's), and the app runs unprofiled. Before: "ArgumentError:
# invalid byte sequence in UTF-8", naming nothing.
class EnvBytesTest < Minitest::Test
  include EnvVars

  BAD = "a\xFFb"
  SECRETS = %w[FATHOM_PUSH_TOKEN FATHOM_PUSH_PASSWORD FATHOM_RACK_TOKEN].freeze
  BASE = { "FATHOM_DIR" => "/tmp/fathom-env-bytes", "FATHOM_PUSH" => "pyroscope://127.0.0.1:4040" }.freeze
  # Every variable fathom/setup reads for heap and gc, and for pushing.
  SETUP_VARIABLES = %w[FATHOM_MODE FATHOM_DIR FATHOM_EVERY FATHOM_KEEP FATHOM_KEEP_MB FATHOM_INTERVAL FATHOM_MAX_DEPTH
                       FATHOM_EXACT FATHOM_CENSUS FATHOM_COALESCE FATHOM_GC_SOURCE FATHOM_FORMAT].freeze
  PUSH_VARIABLES = %w[FATHOM_PUSH FATHOM_SERVICE FATHOM_LABELS FATHOM_PUSH_TOKEN FATHOM_PUSH_USER FATHOM_PUSH_PASSWORD
                      FATHOM_PUSH_TENANT].freeze

  def assert_names(name, error)
    assert_match(/\Afathom: #{name} holds bytes that are not UTF-8: /, error.message)
    if SECRETS.include?(name)
      assert_match(/not shown: it is a secret/, error.message)
    else
      assert_includes error.message, '\\xFF', "the bytes, escaped"
    end
    assert error.message.valid_encoding?
  end

  def test_every_setting_names_its_variable
    [BAD, BAD.b, "\xC3(".b].each do |bytes|
      SETUP_VARIABLES.each do |name|
        env = BASE.merge("FATHOM_MODE" => "heap,gc", name => bytes)
        assert_names(name, assert_raises(ArgumentError, name) { Fathom::AlwaysOn::Settings.always_on(env) }) if bytes == BAD
        assert_raises(ArgumentError, name) { Fathom::AlwaysOn::Settings.always_on(env) }
      end
      PUSH_VARIABLES.each do |name|
        error = assert_raises(ArgumentError, name) { Fathom::Push.from_env(BASE.merge(name => bytes)) }
        assert_match(/\Afathom: #{name} holds bytes that are not UTF-8/, error.message)
        assert_names(name, error) if bytes == BAD
      end
    end
  end

  def test_a_url_is_shown_without_its_password
    error = assert_raises(ArgumentError) { Fathom::Push.from_env("FATHOM_PUSH" => "pyroscope://u:pw_S3CRET@h\xFF:4040") }
    assert_match(/FATHOM_PUSH holds bytes that are not UTF-8: "pyroscope:\/\/\*\*\*@h\\xFF:4040"/, error.message)
    refute_includes error.message, "pw_S3CRET"
  end

  def test_rack_settings_and_endpoint_labels
    with_env("FATHOM_RACK_TOKEN" => "0123456789abcdef#{BAD}") do
      error = assert_raises(ArgumentError) { Fathom::Rack::App.new(enabled: true) }
      assert_names("FATHOM_RACK_TOKEN", error)
    end
    with_env("FATHOM_RACK_HOSTS" => "ok.internal,#{BAD}") do
      assert_names("FATHOM_RACK_HOSTS", assert_raises(ArgumentError) { Fathom::Rack::App.new(enabled: true) })
    end
    with_env("FATHOM_KEEP" => BAD) do
      assert_names("FATHOM_KEEP", assert_raises(ArgumentError) { Fathom::Rack::App.new(enabled: true) })
    end
    # The Ruby API's own values: refused naming the option, not an encoding error.
    assert_match(/hosts must hold host names/, assert_raises(ArgumentError) { Fathom::Rack::App.new(hosts: BAD) }.message)
    assert_match(/token must be at least 16/,
                 assert_raises(ArgumentError) { Fathom::Rack::App.new(token: "0123456789abcdef#{BAD}") }.message)
    # FATHOM_ENDPOINT_LABELS: one line and off, as for any other bad value.
    err = StringIO.new
    old = $stderr
    $stderr = err
    begin
      refute Fathom::Context::Switch.enabled?("FATHOM_ENDPOINT_LABELS" => BAD)
    ensure
      $stderr = old
    end
    assert_match(/FATHOM_ENDPOINT_LABELS="a\\xFFb" ignored/, err.string)
  end

  # The process: one line naming the variable, and the program runs.
  def test_the_app_runs_unprofiled_and_is_told_which_variable
    require_native!
    %w[FATHOM_LABELS FATHOM_SERVICE FATHOM_PUSH FATHOM_PUSH_TOKEN FATHOM_PUSH_TENANT FATHOM_MODE FATHOM_DIR].each do |name|
      env = TestHelper::PLAIN_ENV.merge(BASE).merge("FATHOM_PUSH" => "pyroscope://127.0.0.1:1", name => BAD)
      out, err, status = Open3.capture3(env, RbConfig.ruby, "-I#{TestHelper::LIB}", "-rfathom/setup", "-e", 'puts "ran"')
      assert status.success?, err
      assert_equal "ran\n", out
      assert_equal 1, err.lines.size, err
      assert_match(/\Afathom\/setup: not profiling: ArgumentError: fathom: #{name} holds bytes that are not UTF-8: /, err)
    end
  end
end
