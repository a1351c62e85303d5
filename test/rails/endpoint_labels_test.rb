# frozen_string_literal: true

require "test_helper"
require "support/rails_app"

# FATHOM_ENDPOINT_LABELS=1 in the suite's Rails app: Fathom::Rack::RequestLabels
# first in the stack, and the labels an action, a job performed in it and a
# route without a controller run with (read back from Fathom::Labels in the
# app: test/rails_app's ProductsController#labels and LabelsProbeJob).
# Deterministic: no sampling involved.
class EndpointLabelsTest < Minitest::Test
  def setup
    require_native!
    RailsApp.require!(self)
  end

  def teardown
    @server&.stop
  end

  def stack(env)
    out, err, status = RailsApp.rails("middleware", env: env)
    assert status.success?, err
    [out.lines.filter_map { |l| l.split.last if l.start_with?("use ") }, err]
  end

  def test_the_middleware_is_first_only_when_asked
    labelled, = stack("FATHOM_ENDPOINT_LABELS" => "1", "FATHOM_RACK" => "1")
    assert_equal "Fathom::Rack::RequestLabels", labelled.first, labelled.inspect
    assert_includes labelled, "Fathom::Rack::App"
    plain, = stack({})
    refute_includes plain, "Fathom::Rack::RequestLabels"
    bad, err = stack("FATHOM_ENDPOINT_LABELS" => "yes")
    refute_includes bad, "Fathom::Rack::RequestLabels"
    assert_match(/FATHOM_ENDPOINT_LABELS="yes" ignored/, err)
  end

  def test_actions_jobs_and_other_routes_are_labelled_by_endpoint
    @server = RailsApp::Server.new({ "FATHOM_ENDPOINT_LABELS" => "1" }, workers: 1)
    res = @server.get("/products/3/labels")
    assert_equal "200", res.code, res.body
    seen = JSON.parse(res.body)
    assert_equal({ "kind" => "request", "endpoint" => "ProductsController#labels", "span_id" => "" }, seen["action"])
    assert_equal({ "kind" => "job", "endpoint" => "LabelsProbeJob", "span_id" => "" }, seen["job"])
    # A route to a Rack app, not a controller: the path pattern.
    res = @server.get("/probes/12345/labels")
    assert_equal "200", res.code, res.body
    assert_equal({ "kind" => "request", "endpoint" => "GET /probes/:id/labels", "span_id" => "" }, JSON.parse(res.body))
  end

  def test_nothing_is_labelled_without_the_switch
    @server = RailsApp::Server.new({}, workers: 1)
    seen = JSON.parse(@server.get("/products/3/labels").body)
    refute seen["action"].key?("endpoint"), seen.inspect
  end
end
