# frozen_string_literal: true

# What a Rails developer profiles with `fathom run -- bin/rails runner
# ./script/render_loop.rb`: requests through the whole stack (routing,
# controller, ActiveRecord, views with partials, JSON, a job), in-process
# with Rails' integration session. RENDER_LOOPS (default 20) page renders.
require "action_dispatch/testing/integration"

session = ActionDispatch::Integration::Session.new(Rails.application)
loops = Integer(ENV.fetch("RENDER_LOOPS", "20"))
bytes = 0
loops.times do |i|
  session.get "/products"
  raise "GET /products: #{session.response.status}" unless session.response.status == 200

  bytes += session.response.body.bytesize
  session.get "/products/#{(i * 97 % 2000) + 1}.json"
  raise "GET /products/N.json: #{session.response.status}" unless session.response.status == 200
end
puts "rendered #{loops} pages, #{bytes} bytes; GC.count=#{GC.count}; default_internal=#{Encoding.default_internal.inspect}"
