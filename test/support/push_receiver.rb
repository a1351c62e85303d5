# frozen_string_literal: true

require "socket"
require "open3"
require "zlib"
require "stringio"

# A loopback HTTP/1.1 server for the push tests: it records every request
# (method, path, headers, body) and answers from a script of statuses
# (200 when the script is empty). No WEBrick (not in the bundle): one
# request per connection, Content-Length or chunked bodies, which is what
# Net::HTTP and the pyroscope gem's client (reqwest) send.
#
# PushReceiver.decode turns a Push body into series with protoc, from the
# message definitions in test/fixtures/pyroscope/ (written from
# grafana/pyroscope's api/push/v1/push.proto and api/types/v1/types.proto).
class PushReceiver
  Request = Struct.new(:method, :path, :headers, :body)
  Series = Struct.new(:labels, :samples) do
    def label(name)
      labels.find { |n, _| n == name }&.last
    end
  end
  Sample = Struct.new(:raw_profile, :id)
  PROTO_DIR = File.expand_path("../fixtures/pyroscope", __dir__)

  attr_reader :port

  # statuses: answers in order, e.g. [500, 200]; delay: seconds to sit on
  # each request before answering (a slow server); :hang never answers.
  def initialize(statuses: [], delay: 0)
    @server = TCPServer.new("127.0.0.1", 0)
    @port = @server.addr[1]
    @statuses = statuses.dup
    @delay = delay
    @requests = []
    @taken = 0
    @arrived = ConditionVariable.new
    @lock = Mutex.new
    @clients = []
    @thread = Thread.new { serve }
    @thread.report_on_exception = false
  end

  def url(scheme = "pyroscope")
    "#{scheme}://127.0.0.1:#{@port}"
  end

  # Waits for the next request not yet returned (nil after `timeout`
  # seconds). Queue#pop(timeout:) is Ruby 3.2+.
  def next_request(timeout: 10)
    give_up = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    @lock.synchronize do
      while @taken >= @requests.size
        left = give_up - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        return nil if left <= 0

        @arrived.wait(@lock, left)
      end
      @taken += 1
      @requests[@taken - 1]
    end
  end

  # Every request received so far.
  def requests
    @lock.synchronize { @requests.dup }
  end

  def close
    @thread.kill
    @thread.join(1)
    @server.close
    @lock.synchronize { @clients.each { |c| c.close rescue nil } } # rubocop:disable Style/RescueModifier
  end

  # A PushRequest body (gunzipped first if the headers say so) decoded with
  # protoc, as [Series].
  def self.decode(request)
    body = request.body
    body = Zlib.gunzip(body) if request.headers["content-encoding"] == "gzip"
    text, err, status = Open3.capture3("protoc", "--decode=push.v1.PushRequest", "-I", PROTO_DIR, "push/v1/push.proto",
                                       stdin_data: body, binmode: true)
    raise "protoc could not decode the push body: #{err}" unless status.success?

    parse_text(text)
  end

  # protoc's text format for the few messages here: series { labels { name:
  # value: } samples { raw_profile: ID: } }.
  def self.parse_text(text)
    series = []
    pending = {}
    text.each_line do |line|
      case line.strip
      when "series {" then series << Series.new([], [])
      when "samples {" then series.last.samples << Sample.new("".b, nil)
      when /\Aname: "(.*)"\z/ then pending[:name] = unescape(Regexp.last_match(1)).force_encoding(Encoding::UTF_8)
      when /\Avalue: "(.*)"\z/ then series.last.labels << [pending.delete(:name), unescape(Regexp.last_match(1)).force_encoding(Encoding::UTF_8)]
      when /\Araw_profile: "(.*)"\z/ then series.last.samples.last.raw_profile = unescape(Regexp.last_match(1))
      when /\AID: "(.*)"\z/ then series.last.samples.last.id = unescape(Regexp.last_match(1))
      end
    end
    series
  end

  # The C escapes protoc's text format writes for bytes (octal, \n \r \t \"
  # \' \\), back to bytes.
  def self.unescape(text)
    out = "".b
    s = StringIO.new(text.b)
    until s.eof?
      c = s.getc
      if c != "\\"
        out << c
        next
      end
      c = s.getc
      if c.match?(/[0-7]/)
        digits = c
        digits << s.getc while digits.size < 3 && !s.eof? && s.string[s.pos].match?(/[0-7]/)
        out << digits.to_i(8).chr
      elsif c == "x"
        digits = +""
        digits << s.getc while digits.size < 2 && !s.eof? && s.string[s.pos].match?(/\h/)
        out << digits.hex.chr
      else
        out << ({ "n" => "\n", "r" => "\r", "t" => "\t", "a" => "\a", "b" => "\b", "f" => "\f", "v" => "\v" }[c] || c)
      end
    end
    out
  end

  private

  def serve
    loop do
      client = @server.accept
      @lock.synchronize { @clients << client }
      Thread.new(client) { |c| handle(c) }.report_on_exception = false
    end
  end

  def handle(client)
    line = client.gets or return
    method, path, = line.split(" ")
    headers = {}
    while (h = client.gets) && h != "\r\n"
      name, value = h.split(":", 2)
      headers[name.strip.downcase] = value.to_s.strip
    end
    body = read_body(client, headers)
    status = @lock.synchronize do
      @requests << Request.new(method, path, headers, body)
      @arrived.broadcast
      @statuses.shift
    end || 200
    return sleep if @delay == :hang

    sleep(@delay) if @delay.positive?
    reply = status == 200 ? "{}" : %({"code":"unavailable","message":"scripted #{status}"})
    client.write("HTTP/1.1 #{status} X\r\nContent-Type: application/json\r\nContent-Length: #{reply.bytesize}\r\n" \
                 "Connection: close\r\n\r\n#{reply}")
  rescue IOError, SystemCallError
    nil
  ensure
    client.close unless @delay == :hang || client.closed?
  end

  def read_body(client, headers)
    if headers["transfer-encoding"].to_s.downcase == "chunked"
      body = "".b
      while (size = client.gets.to_s.to_i(16)).positive?
        body << client.read(size)
        client.read(2)
      end
      client.gets
      body
    else
      client.read(headers["content-length"].to_i) || "".b
    end
  end
end
