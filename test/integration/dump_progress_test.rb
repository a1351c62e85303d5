# frozen_string_literal: true

require "test_helper"
require "open3"
require "pty"

# `fathom analyze` shows a progress line (phase, MB read, MB/s) on stderr
# only when stderr is a terminal, and clears it before the report.
class DumpProgressTest < Minitest::Test
  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-dump-progress")
    # A synthetic dump_all file of ~20 MB: over the 4 MiB threshold and over
    # the 16 MiB between two parse updates.
    @path = File.join(@dir, "big.json")
    File.open(@path, "w") do |f|
      n = 120_000
      f.puts %({"type":"ROOT", "root":"vm", "references":["0x#{format("%x", 0x10000)}"]})
      n.times do |i|
        nxt = i + 1 < n ? %(, "references":["0x#{format("%x", 0x10000 + 40 * (i + 1))}"]) : ""
        f.puts %({"address":"0x#{format("%x", 0x10000 + 40 * i)}", "type":"OBJECT", "class":"0x8", "ivars":1#{nxt}, ) +
               %("file":"/app/models/some_long_file_name_for_padding.rb", "line":#{i % 500}, "generation":#{i % 30}, ) +
               %("memsize":40, "flags":{"wb_protected":true, "old":true, "uncollectible":true, "marked":true}})
      end
    end
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_progress_line_on_a_terminal
    output = +""
    PTY.spawn(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", TestHelper::EXE, "analyze", @path) do |r, _w, pid|
      begin
        loop { output << r.readpartial(4096) }
      rescue EOFError, Errno::EIO
        # the child closed the terminal
      end
      Process.wait(pid)
    end
    assert $?.success?, output
    assert_match(/\rfathom analyze: parse, \d+ MB read, \d+ MB\/s/, output)
    %w[graph dominators encode].each { |phase| assert_includes output, "\rfathom analyze: #{phase}..." }
    # Cleared (carriage return, erase line) before the report is printed.
    assert_match(/\r\e\[K.*Dump: 120000 objects/m, output)
  end

  def test_no_progress_line_when_stderr_is_not_a_terminal
    stdout, err, status = TestHelper.run_fathom("analyze", @path, env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    assert_match(/Dump: 120000 objects/, stdout)
    refute_includes err, "fathom analyze:"
    refute_includes stdout, "\r"
  end
end
