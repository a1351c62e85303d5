# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"
require "net/http"

# A real nginx (Debian's package; script/setup installs it) in front of a
# server on 127.0.0.1, in the shape of nginx's documented default reverse
# proxy: `location / { proxy_pass http://127.0.0.1:PORT; }` and nothing
# else. So it speaks HTTP/1.0 to the upstream, sends `Host: 127.0.0.1:PORT`
# (its $proxy_host) and `Connection: close`, and adds no header naming the
# client: what Fathom::Rack::Guard must still refuse.
#
# It runs as an ordinary process of the test: one process (no master, no
# workers, no daemon), listening on a free port above 1024, with its
# config, pid file, logs and temp directories in a directory of its own,
# so it needs no root and touches nothing of a system nginx.
class NginxProxy
  CANDIDATES = %w[/usr/sbin/nginx /usr/bin/nginx].freeze

  attr_reader :port

  # The nginx binary, or nil.
  def self.binary
    on_path = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, "nginx") }
    (on_path + CANDIDATES).find { |path| File.file?(path) && File.executable?(path) }
  end

  def self.missing
    binary ? nil : "nginx not installed (apt-get install nginx; script/setup does)"
  end

  def initialize(upstream_port)
    @dir = Dir.mktmpdir("fathom-nginx")
    @port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    File.write(config_path, config(upstream_port))
    @pid = Process.spawn(self.class.binary, "-p", @dir, "-c", config_path, "-e", error_log,
                         %i[out err] => [File.join(@dir, "stdout.log"), "w"], pgroup: true)
    wait_ready
  end

  # A GET through the proxy, as HTTP/1.1 (Net::HTTP); `headers` are the client's.
  def get(path, headers = {}, timeout: 60)
    Net::HTTP.start("127.0.0.1", @port, read_timeout: timeout) { |http| http.get(path, headers) }
  end

  def stop
    return unless @pid

    Process.kill("TERM", @pid)
    Process.wait(@pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @pid = nil
    FileUtils.rm_rf(@dir)
  end

  def log_text
    File.exist?(error_log) ? File.read(error_log) : ""
  end

  private

  def config_path = File.join(@dir, "nginx.conf")

  def error_log = File.join(@dir, "error.log")

  # The temp paths are nginx's own (proxy buffers spill to proxy_temp),
  # put here so that nginx writes nothing outside the directory.
  def config(upstream_port)
    <<~CONF
      daemon off;
      master_process off;
      pid #{@dir}/nginx.pid;
      error_log #{error_log};
      events { worker_connections 64; }
      http {
        access_log off;
        client_body_temp_path #{@dir}/client_body;
        proxy_temp_path #{@dir}/proxy;
        fastcgi_temp_path #{@dir}/fastcgi;
        uwsgi_temp_path #{@dir}/uwsgi;
        scgi_temp_path #{@dir}/scgi;
        server {
          listen 127.0.0.1:#{@port};
          location / {
            proxy_pass http://127.0.0.1:#{upstream_port};
          }
        }
      }
    CONF
  end

  def wait_ready
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    loop do
      return if (TCPSocket.new("127.0.0.1", @port).close || true rescue false) # rubocop:disable Style/RescueModifier
      raise "nginx exited: #{log_text}" if Process.wait(@pid, Process::WNOHANG)
      raise "nginx did not listen in 30 s: #{log_text}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
  end
end
