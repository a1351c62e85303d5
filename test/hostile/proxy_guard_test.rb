# frozen_string_literal: true

require "test_helper"
require "socket"
require "io/wait"
require "support/rack_server"
require "support/rails_app"
require "support/nginx_proxy"

# The loopback rule (Fathom::Rack::Guard, no token) through real servers
# and a real nginx in its default proxy_pass shape, with nothing set by
# hand in the env: what each server reports is what the guard reads.
#
#   puma 5.x: Debian's (test/fixtures/rack_app on /usr/bin/ruby), whose
#             SERVER_PROTOCOL is always HTTP/1.1: the request's version is
#             only in HTTP_VERSION. Before the fix, an HTTP/1.0 request
#             from nginx (or curl --http1.0) got a 200 and a heap dump.
#   puma 6.x: the Rails app's bundle (test/rails_app, FATHOM_RACK=1),
#             where SERVER_PROTOCOL is the request's.
class ProxyGuardTest < Minitest::Test
  INDEX = "/debug/fathom/"
  REFUSED = /loopback clients only/.freeze

  def teardown
    @proxy&.stop
    @server&.stop
  end

  def test_puma_5_refuses_http_1_0_and_nginx_default_proxy
    require_tool!(RackServer.missing)
    require_tool!(NginxProxy.missing)
    @server = RackServer.new
    major = @server.log_text[/Puma version: (\d+)\./, 1] || @server.log_text[/Version (\d+)\./, 1]
    assert_equal "5", major, "Debian's puma is 5.x: #{@server.log_text}"
    check_server(@server.port)
  end

  def test_puma_6_refuses_http_1_0_and_nginx_default_proxy
    require_native!
    require_tool!(NginxProxy.missing)
    RailsApp.require!(self)
    @server = RailsApp::Server.new({ "FATHOM_RACK" => "1" }, workers: 1)
    assert_match(/Puma version: 6\./, @server.log_text)
    check_server(@server.port)
  end

  private

  def require_tool!(missing)
    return unless missing

    flunk(missing) if TestHelper.ci?
    skip(missing)
  end

  # What every server must do: serve a local HTTP/1.1 client, refuse the
  # same request as HTTP/1.0 (with or without a `Version:` header saying
  # otherwise) and refuse whatever comes through nginx.
  def check_server(port)
    host = "127.0.0.1:#{port}"
    status, body = raw(port, "GET #{INDEX} HTTP/1.1", "Host" => host, "Connection" => "close")
    assert_equal 200, status, "a local HTTP/1.1 client is served: #{body}"

    status, body = raw(port, "GET #{INDEX} HTTP/1.0", "Host" => host)
    assert_equal 403, status, "curl --http1.0 -H 'Host: #{host}'"
    assert_match(/came as HTTP\/1\.0/, body)
    # puma 5 appends a client's Version: header to its HTTP_VERSION.
    status, = raw(port, "GET #{INDEX} HTTP/1.0", "Host" => host, "Version" => "HTTP/1.1")
    assert_equal 403, status, "HTTP/1.0 with a Version: HTTP/1.1 header"
    status, = raw(port, "GET #{INDEX} HTTP/1.0")
    assert_equal 403, status, "HTTP/1.0 without Host"

    @proxy = NginxProxy.new(port)
    ["#{INDEX}dump", INDEX, "#{INDEX}heap"].each do |path|
      res = @proxy.get(path)
      assert_equal "403", res.code, "through nginx: #{path}: #{res.body[0, 200].inspect}"
      assert_match(REFUSED, res.body)
      assert_match(/came as HTTP\/1\.0/, res.body)
    end
    res = @proxy.get(INDEX, { "Version" => "HTTP/1.1", "Host" => "localhost" })
    assert_equal "403", res.code, "through nginx with a Version: header"
  end

  # One request on its own connection, written as given, read until the
  # server closes it (HTTP/1.0, or Connection: close); [status, body].
  # No half-close: puma takes an EOF from the client for a gone client.
  def raw(port, request_line, headers = {})
    TCPSocket.open("127.0.0.1", port) do |s|
      s.write("#{request_line}\r\n#{headers.map { |k, v| "#{k}: #{v}\r\n" }.join}\r\n")
      raise "no reply in 30 s" unless s.wait_readable(30)

      reply = s.read
      head, body = reply.split("\r\n\r\n", 2)
      [head[%r{\AHTTP/\d\.\d (\d{3})}, 1].to_i, body.to_s]
    end
  end
end
