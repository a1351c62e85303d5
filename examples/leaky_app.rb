# frozen_string_literal: true

# A tiny "web app" with a leak, for the demo (script/demo) and the CLI tests.
#
# Every request renders a page (lots of short-lived garbage) and stores the
# session in SessionStore::SESSIONS, which nobody ever prunes: the leak.
# Profile it with:
#   ruby -Ilib exe/fathom run --mode heap -o heap.pb.gz -- ruby examples/leaky_app.rb
#   ruby -Ilib exe/fathom report heap.pb.gz

class Session
  attr_reader :id, :payload

  def initialize(id)
    @id = id
    @payload = "session-data-#{id}-" * 40 # ~800 bytes per session
  end
end

module SessionStore
  SESSIONS = {}

  def self.remember(id)
    SESSIONS[id] = Session.new(id)
  end
end

class PageRenderer
  def render(request_id)
    rows = Array.new(20) { |i| "<tr><td>#{request_id}</td><td>#{i}</td></tr>" }
    "<table>#{rows.join}</table>".upcase
  end
end

class App
  def initialize
    @renderer = PageRenderer.new
  end

  def call(request_id)
    SessionStore.remember(request_id)
    @renderer.render(request_id).bytesize
  end
end

requests = Integer(ENV.fetch("LEAKY_APP_REQUESTS", "30000"))
app = App.new
bytes = 0
requests.times { |i| bytes += app.call(i) }
warn "leaky_app: served #{requests} requests (#{bytes} bytes rendered), #{SessionStore::SESSIONS.size} sessions kept"
