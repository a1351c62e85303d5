# frozen_string_literal: true

require "socket"

# A loopback HTTP server that answers as a hostile or broken peer would,
# for the push client and `fathom dump`: each request (its line, headers
# and body read whole) is handed to the block with the connection, and the
# block writes whatever reply it likes, raw. Helpers write the usual
# hostile ones: a body of N bytes streamed (never held in memory), a
# header echoed back, a body cut before its end.
class HostileServer
  Request = Struct.new(:line, :headers, :body)

  attr_reader :port, :requests

  def initialize(&handler)
    @handler = handler
    @server = TCPServer.new("127.0.0.1", 0)
    @port = @server.addr[1]
    @requests = Queue.new
    @thread = Thread.new { serve }
    @thread.report_on_exception = false
  end

  def url(scheme = "http")
    "#{scheme}://127.0.0.1:#{@port}"
  end

  def close
    @thread.kill
    @thread.join(5)
    @server.close unless @server.closed?
  end

  # Writes `size` bytes of `byte` in 1 MB pieces, until done or the
  # client goes away; returns how many were written.
  def self.stream(io, size, byte = "x")
    piece = byte.b * (1 << 20)
    written = 0
    while written < size
      n = [piece.bytesize, size - written].min
      io.write(n == piece.bytesize ? piece : piece.byteslice(0, n))
      written += n
    end
    written
  rescue IOError, SystemCallError
    written
  end

  private

  def serve
    loop do
      client = @server.accept
      handle(client)
    end
  end

  # One request per connection, answered by the block, then closed.
  def handle(client)
    line = client.gets or return
    headers = {}
    while (h = client.gets) && h != "\r\n"
      name, value = h.split(":", 2)
      headers[name.strip.downcase] = value.to_s.strip
    end
    # Read whole: closing with unread bytes would reset the connection
    # before the client has read the reply.
    body = client.read(headers["content-length"].to_i) if headers["content-length"]
    request = Request.new(line.strip, headers, body)
    @requests << request
    @handler.call(request, client)
  rescue IOError, SystemCallError
    nil
  ensure
    client&.close unless client&.closed?
  end
end
