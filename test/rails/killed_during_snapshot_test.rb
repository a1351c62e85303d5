# frozen_string_literal: true

require "test_helper"
require "support/rails_app"
require "support/killed_during_snapshot"

# Issue 40, item 5, on the suite's Ruby: the Rails app under its own puma
# (6.x, single mode: the process SIGKILLed is the one that serves),
# FATHOM_RACK=1 mounting the endpoints. test/hostile/killed_during_snapshot_test.rb
# runs it on Debian's puma 5.6.5.
class RailsKilledDuringSnapshotTest < Minitest::Test
  include KilledDuringSnapshot

  def setup
    require_native!
    RailsApp.require!(self)
  end

  def test_puma_killed_during_a_snapshot_leaves_its_port_free_and_no_child_behind
    @server = RailsApp::Server.new({ "FATHOM_RACK" => "1" }, workers: 0)
    assert_killed_during_a_snapshot_leaves_nothing_behind(@server, page: "/up")
    port = @server.port
    @server = nil # killed and reaped above
    @restarted = RailsApp::Server.new({ "FATHOM_RACK" => "1" }, workers: 0, port: port)
    assert_equal "200", @restarted.get("/up").code
  end
end
