# frozen_string_literal: true

require "test_helper"
require "fathom/rack"
require "json"

# The app forks while an endpoint records (?seconds=N): the child must not
# inherit a profiler that nobody will stop, nor a guard that nobody holds.
class RackForkTest < Minitest::Test
  def setup
    require_native!
    skip "fork" unless Process.respond_to?(:fork)
  end

  def env(path, query)
    { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query,
      "REMOTE_ADDR" => "127.0.0.1", "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_HOST" => "localhost" }
  end

  def running_profilers
    ObjectSpace.each_object(Fathom::CpuProfiler).select(&:running?).size +
      ObjectSpace.each_object(Fathom::GcProfiler).select(&:running?).size
  end

  # In the child: the profile endpoint again, then what still runs.
  def fork_during(path, query)
    app = Fathom::Rack::App.new(enabled: true, token: nil)
    parent = Thread.new { app.call(env(path, query)) }
    kind = path == "/gc" ? :gc : :cpu
    sleep 0.05 until Fathom::Rack::Guard.lock(kind).locked? || !parent.alive?
    sleep 0.3 # the profiler has started
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      status, _, body = app.call(env(path, "seconds=1"))
      writer.write(JSON.dump("status" => status, "body" => status == 200 ? "" : body.join,
                             "running" => running_profilers, "locked" => Fathom::Rack::Guard.lock(kind).locked?))
      writer.close
      exit!(0)
    end
    writer.close
    result = JSON.parse(reader.read)
    Process.wait(pid)
    status, = parent.value
    assert_equal 200, status, "the parent's own request still completes"
    assert_equal 0, running_profilers
    result
  ensure
    reader&.close
  end

  def test_a_child_forked_during_profile_stops_the_endpoints_profiler_and_serves_again
    result = fork_during("/profile", "seconds=2")
    assert_equal 200, result["status"], result["body"]
    assert_equal 0, result["running"], "the child's CpuProfiler still runs"
    refute result["locked"]
  end

  def test_a_child_forked_during_gc_stops_the_endpoints_profiler_and_serves_again
    result = fork_during("/gc", "seconds=2")
    assert_equal 200, result["status"], result["body"]
    assert_equal 0, result["running"], "the child's GcProfiler still runs"
    refute result["locked"]
  end

  def test_a_child_forked_by_a_profiled_request_does_not_keep_its_profiler
    reader, writer = IO.pipe
    page = lambda do |_|
      pid = fork do
        reader.close
        sleep 0.2
        writer.write(running_profilers.to_s)
        writer.close
        exit!(0)
      end
      Process.wait(pid)
      [200, {}, ["forked"]]
    end
    status, = Fathom::Rack::Middleware.new(page, enabled: true, token: nil).call(env("/", "fathom=cpu"))
    writer.close
    assert_equal 200, status
    assert_equal "0", reader.read
  ensure
    reader&.close
    writer&.close unless writer&.closed?
  end
end
