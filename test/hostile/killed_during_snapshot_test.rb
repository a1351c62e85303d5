# frozen_string_literal: true

require "test_helper"
require "support/rack_server"
require "support/killed_during_snapshot"

# Issue 40, item 5, on the issue's own setup: Debian's puma 5.6.5 (on
# Debian's Ruby, whichever Ruby runs the suite) serving the Sinatra app.
# test/rails/killed_during_snapshot_test.rb runs it on the suite's Ruby.
class KilledDuringSnapshotTest < Minitest::Test
  include KilledDuringSnapshot

  def setup
    require_native!
    if (why = RackServer.missing)
      flunk(why) if TestHelper.ci?
      skip(why)
    end
  end

  def test_puma_killed_during_a_snapshot_leaves_its_port_free_and_no_child_behind
    # 300k more live strings: a snapshot long enough for its child to be seen.
    @server = RackServer.new({ "FATHOM_BENCH_BALLAST" => "300000" })
    assert_killed_during_a_snapshot_leaves_nothing_behind(@server, page: "/")
    port = @server.port
    @server = nil # killed and reaped above
    # And a new puma starts on its port.
    @restarted = RackServer.new(port: port)
    assert_equal "200", @restarted.get("/").code
  end
end
