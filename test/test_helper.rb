# frozen_string_literal: true

require "minitest/autorun"
require_relative "support/test_times"
require "open3"
require "tmpdir"
require "fileutils"
require "rbconfig"
require "zlib"
require "stringio"
require "json"
require "fathom"

# Shared helpers for the minitest suites (unit tests and crash tests).
module TestHelper
  ROOT = File.expand_path("..", __dir__)
  LIB = File.join(ROOT, "lib")
  EXE = File.join(ROOT, "exe/fathom")
  PROTO_DIR = "/usr/share/gocode/src/github.com/google/pprof/proto"
  # The suite runs under `bundle exec`, whose RUBYOPT would load Bundler into
  # programs run with `fathom run` too; tests profile the program alone.
  PLAIN_ENV = { "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil, "BUNDLE_BIN_PATH" => nil, "BUNDLER_SETUP" => nil }.freeze

  module_function

  # Process.spawn's redirect for a server's stdout and stderr into one log:
  # the file opened once, in append mode. `out: log, err: log` opens it
  # twice, each with its own offset, so a line on stderr (fathom's notices)
  # overwrites one on stdout (puma's "Worker booted") at the same offset; a
  # test that reads both then misses one of them.
  def log_file(path)
    [path, File::WRONLY | File::CREAT | File::TRUNC | File::APPEND, 0o600]
  end

  # CI must run everything: there a missing tool or extension is a failure.
  def ci?
    ENV["CI"] == "true"
  end

  def tool_available?(name)
    ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).any? do |dir|
      path = File.join(dir, name)
      File.file?(path) && File.executable?(path)
    end
  end

  # Directory with go's HOME/GOCACHE/GOPATH: the test user's may be unwritable.
  def go_env
    base = File.join(Dir.tmpdir, "fathom-go-#{Process.uid}")
    { "HOME" => base, "GOCACHE" => File.join(base, "cache"), "GOPATH" => File.join(base, "path") }
  end

  # Runs `go tool pprof ARGS...` and returns its stdout (raises on failure).
  def go_pprof(*args)
    out, err, status = Open3.capture3(go_env, "go", "tool", "pprof", *args)
    raise "go tool pprof #{args.join(" ")} failed (#{status.exitstatus}): #{err}" unless status.success?

    out
  end

  # A profile written with protoc from text format (see profile.proto);
  # returns the raw protobuf bytes.
  def protoc_encode(text)
    out, err, status = Open3.capture3("protoc", "--encode=perftools.profiles.Profile", "-I", PROTO_DIR,
                                      "profile.proto", stdin_data: text, binmode: true)
    raise "protoc failed: #{err}" unless status.success?

    out
  end

  # fathom: true marks it as Fathom's own file (the gzip header comment
  # the native writer puts there, core/encode/gzip.h), which Files::AtomicFile and
  # Rotation check before they overwrite or delete a file.
  def gzip(bytes, fathom: false)
    io = StringIO.new(+"".b)
    gz = Zlib::GzipWriter.new(io)
    gz.comment = "fathom" if fathom
    gz.write(bytes)
    gz.close
    io.string
  end

  # Runs exe/fathom in a subprocess; returns [stdout, stderr, Process::Status].
  def run_fathom(*args, env: {}, chdir: ROOT)
    Open3.capture3(env, RbConfig.ruby, "-I#{LIB}", EXE, *args, chdir: chdir)
  end
end

module Minitest
  class Test
    # Skips (fails in CI) unless the native extension is built.
    def require_native!
      return if Fathom::NativeLoader.available?

      message = "native extension not built (rake compile)"
      flunk(message) if TestHelper.ci?
      skip(message)
    end

    # Skips (fails in CI) unless `name` is on PATH.
    def skip_unless_tool(name, hint = nil)
      return if TestHelper.tool_available?(name)

      message = "#{name} not installed#{" (#{hint})" if hint}"
      flunk(message) if TestHelper.ci?
      skip(message)
    end

    def skip_unless_go!
      skip_unless_tool("go", "apt-get install golang-go")
    end

    def skip_unless_protoc!
      skip_unless_tool("protoc", "apt-get install protobuf-compiler")
      return if File.exist?(File.join(TestHelper::PROTO_DIR, "profile.proto"))

      message = "#{TestHelper::PROTO_DIR}/profile.proto missing (apt-get install golang-github-google-pprof-dev)"
      flunk(message) if TestHelper.ci?
      skip(message)
    end

    def go_pprof(*args)
      TestHelper.go_pprof(*args)
    end
  end
end

# Builds profiles for the reader and report tests without the extension:
# samples are given as stacks of function names (leaf first); each function
# gets one location with one line. #to_text is protobuf text format for
# `protoc --encode`; #encode / #gzipped return bytes.
class TextProfile
  attr_accessor :time_nanos, :duration_nanos, :default_sample_type, :comments, :period
  # {function name => [file, line]}: where a function's one location is
  # (default: app.rb, line 10 × its id). "<cfunc>" makes it a C method.
  attr_reader :files

  def initialize(sample_types = [%w[alloc_objects count], %w[alloc_space bytes], %w[inuse_objects count], %w[inuse_space bytes]])
    @strings = [""]
    @sample_types = sample_types
    @samples = []
    @functions = {}
    @time_nanos = 0
    @duration_nanos = 0
    @default_sample_type = nil
    @comments = []
    @period = 0
    @files = {}
  end

  # labels: {"class" => "String"} or {"bytes" => [42, "bytes"]}
  def sample(stack, values, labels = {})
    raise ArgumentError, "need #{@sample_types.size} values" unless values.size == @sample_types.size

    stack.each { |name| function_id(name) }
    @samples << [stack, values, labels]
    self
  end

  def to_text
    out = +""
    @sample_types.each { |t, u| out << "sample_type { type: #{s(t)} unit: #{s(u)} }\n" }
    @samples.each do |stack, values, labels|
      out << "sample { location_id: [#{stack.map { |n| function_id(n) }.join(", ")}] value: [#{values.join(", ")}]"
      labels.each do |k, v|
        out << if v.is_a?(Array)
                 " label { key: #{s(k)} num: #{v[0]}#{" num_unit: #{s(v[1])}" if v[1]} }"
               else
                 " label { key: #{s(k)} str: #{s(v)} }"
               end
      end
      out << " }\n"
    end
    @functions.each do |name, id|
      file, line = @files.fetch(name, ["app.rb", id * 10])
      out << "location { id: #{id} line { function_id: #{id} line: #{line} } }\n"
      out << "function { id: #{id} name: #{s(name)} system_name: #{s(name)} filename: #{s(file)} start_line: #{id} }\n"
    end
    out << "time_nanos: #{@time_nanos}\nduration_nanos: #{@duration_nanos}\n"
    out << "period_type { type: #{s("space")} unit: #{s("bytes")} }\nperiod: #{@period}\n"
    out << "default_sample_type: #{s(@default_sample_type)}\n" if @default_sample_type
    @comments.each { |c| out << "comment: #{s(c)}\n" }
    # Strings last: the table is complete only once everything above interned.
    @strings.each { |str| out << "string_table: #{TextProfile.quote(str)}\n" }
    out
  end

  # A protobuf text-format string literal (Ruby's #inspect escapes differ).
  def self.quote(str)
    body = str.b.gsub(/[\\"]/n) { "\\#{Regexp.last_match(0)}" }
    body = body.gsub(/[^\x20-\x7e]/n) { format("\\%03o", Regexp.last_match(0).ord) }
    "\"#{body}\""
  end

  def encode
    TestHelper.protoc_encode(to_text)
  end

  def gzipped
    TestHelper.gzip(encode)
  end

  private

  def function_id(name)
    @functions[name] ||= @functions.size + 1
  end

  def s(str)
    @strings.index(str) || (@strings << str).size - 1
  end
end
