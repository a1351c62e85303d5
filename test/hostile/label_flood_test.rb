# frozen_string_literal: true

require "test_helper"

# Any client could fill the process's label table (1024 sets) with
# distinct paths through Fathom::Rack::RequestLabels: /aaa, /aab... are
# words, which a path pattern keeps. After that every new set, a route's
# Controller#action included, was recorded as "(other)" (issue 40, "also
# seen"). Now paths take at most max_paths sets (Context::PathBudget);
# routes and jobs keep their names. In a child process: the table is per
# process, and filling it here would leave later tests only "(other)".
class LabelFloodTest < Minitest::Test
  SCRIPT = <<~RUBY
    require "fathom"
    require "fathom/rack/request_labels"
    Fathom::NativeLoader.require!
    recorded = nil
    app = Fathom::Rack::RequestLabels.new(lambda do |env|
      # What Rails does once the controller starts (Context::RailsEndpoint).
      env[Fathom::Rack::RequestLabels::ENV_KEY].switch(env["route"]) if env["route"]
      recorded = [Fathom::Labels.current["endpoint"], Fathom::Native::Labels.pairs(Fathom::Native::Labels.current_set)]
      [200, {}, ["ok"]]
    end)
    call = ->(path, route = nil) { app.call("REQUEST_METHOD" => "GET", "PATH_INFO" => path, "route" => route); recorded }
    # The flood: 3,000 distinct word paths, before any real request.
    words = ("aaa".."zzz").first(3000)
    flood = words.map { |w| call.call("/\#{w}") }
    routes = (1..50).map { |i| call.call("/products/\#{i}", "ProductsController#action\#{i}") }
    job = Fathom::Labels.with(kind: "job", endpoint: "RestockJob") { Fathom::Native::Labels.pairs(Fathom::Native::Labels.current_set) }
    p [Fathom::Labels.stats, flood.first, flood.last, routes.last, job]
  RUBY

  def test_a_flood_of_paths_leaves_routes_and_jobs_their_names
    require_native!
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB, "-e", SCRIPT)
    assert status.success?, err
    stats, first, last, route, job = eval(out) # rubocop:disable Security/Eval
    assert_equal 0, stats[:overflowed], "no set overflowed: #{stats}"
    assert_equal ["GET /aaa", [%w[endpoint GET\ /aaa], %w[kind request]]], first
    assert_equal "GET (other paths)", last.first, "paths past the budget"
    assert_equal [%w[endpoint ProductsController#action50], %w[kind request]], route.last, "a route keeps its name"
    assert_equal [%w[endpoint RestockJob], %w[kind job]], job
    # What the user is told: once.
    lines = err.lines.grep(/request labels: 256 distinct paths/)
    assert_equal 1, lines.size, err
    assert_match(/labelled "GET \(other paths\)", so that clients cannot fill the label table/, lines.first)
  end
end
