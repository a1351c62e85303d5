# frozen_string_literal: true

require "test_helper"
require "fathom/rack"

# The middleware with dir: rotates what it writes (41 ?fathom= requests used
# to leave 41 request-* files beside always-on's rotated 3), names its
# files so that they never collide, and creates them 0600.
class RackMiddlewareFilesTest < Minitest::Test
  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-mw-files")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def env(query)
    { "REQUEST_METHOD" => "GET", "PATH_INFO" => "/", "QUERY_STRING" => query, "REMOTE_ADDR" => "127.0.0.1",
      "HTTP_HOST" => "localhost", "SERVER_PROTOCOL" => "HTTP/1.1", "rack.input" => StringIO.new }
  end

  def profiles
    Dir.children(@dir).grep(/\.(pb|json)\.gz\z/)
  end

  def test_keep_files_bounds_the_request_files
    mw = Fathom::Rack::Middleware.new(->(_) { [200, {}, ["page"]] }, enabled: true, dir: @dir, keep_files: 3)
    names = Array.new(8) do
      status, headers, body = mw.call(env("fathom=gc"))
      assert_equal 200, status
      assert_equal ["page"], body
      headers["x-fathom-profile"]
    end
    assert_equal 8, names.uniq.size
    names.each { |n| assert_match(/\Arequest-gc-#{Process.pid}-\h{8}-\d{8}T\d{6}Z-\d+\.pb\.gz\z/, n) }
    assert_equal names.last(3).sort, profiles.sort, "the newest 3 are kept"
    profiles.each { |f| assert_equal 0o600, File.stat(File.join(@dir, f)).mode & 0o777 }
  end

  def test_fathom_keep_from_the_environment_is_the_default
    saved = ENV["FATHOM_KEEP"]
    ENV["FATHOM_KEEP"] = "2"
    mw = Fathom::Rack::Middleware.new(->(_) { [200, {}, ["page"]] }, enabled: true, dir: @dir)
    5.times { mw.call(env("fathom=gc")) }
    assert_equal 2, profiles.size
  ensure
    ENV["FATHOM_KEEP"] = saved
  end

  def test_a_bad_keep_is_refused_when_the_middleware_is_built
    error = assert_raises(ArgumentError) { Fathom::Rack::Middleware.new(->(_) {}, enabled: true, dir: @dir, keep_files: 0) }
    assert_match(/keep_files/, error.message)
  end
end
