# frozen_string_literal: true

require "test_helper"
require "support/cli_runner"

# Issue 43, defects 2-4: what the command line says when a user gets
# something wrong, and what it refuses to do. In-process (CLIRunner: `fathom
# run` stops short of exec), except where a real exec is the point.
class CLIMessagesTest < Minitest::Test
  include CLIRunner

  def setup
    @dir = Dir.mktmpdir("fathom-cli-messages")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def usage(*args)
    r = run_cli(*args)
    assert_equal 2, r.status, "#{args.inspect}: #{r.out}#{r.err}"
    r.err
  end

  # Defect 2: each message says the rule that was broken, for the CLI user.
  def test_cpu_and_wall_together_names_the_rule
    err = usage("run", "--mode", "cpu,wall", "--", "ruby", "-e", "1")
    assert_match(/--mode cpu and wall cannot be profiled together \(one sampler per process\); pick one/, err)
    refute_match(/must be one or more of/, err)
  end

  def test_top_zero_says_at_least_one
    path = File.join(@dir, "p.pb.gz")
    File.binwrite(path, TestHelper.gzip("x"))
    assert_match(/--top must be at least 1, got 0$/, usage("report", "--top", "0", path))
    refute_match(/in >= 1/, usage("report", "--top", "0", path))
  end

  def test_overwrite_refusal_names_the_cli_option
    foreign = File.join(@dir, "mine.pb.gz")
    File.write(foreign, "not Fathom's")
    err = usage("run", "-o", foreign, "--", "ruby", "-e", "1")
    assert_match(/exists and Fathom did not write it; refusing to overwrite it \(choose another path, or pass --force\)/, err)
    refute_match(/overwrite: true/, err)
    err = usage("merge", "a.pb.gz", "b.pb.gz", "-o", foreign)
    assert_match(/pass --force\)/, err)
  end

  # A real exec: the command is not found.
  def test_a_ruby_file_given_as_the_command_suggests_ruby
    script = File.join(@dir, "app.rb")
    File.write(script, "puts 1\n")
    _, err, status = TestHelper.run_fathom("run", "-o", File.join(@dir, "h.pb.gz"), "app.rb", chdir: @dir)
    assert_equal 127, status.exitstatus
    assert_equal "fathom run: command not found: app.rb (to run a Ruby file: fathom run -- ruby app.rb)\n", err
  end

  def test_report_on_a_ruby_file_or_a_stackprof_dump_names_the_formats_it_reads
    ruby = File.join(@dir, "app.rb")
    File.write(ruby, "require \"json\"\nclass App\n  def call = 1\nend\n")
    # stackprof's dump is Ruby's Marshal of its result Hash.
    stackprof = File.join(@dir, "stackprof-cpu.dump")
    File.binwrite(stackprof, Marshal.dump({ version: 1.2, mode: :cpu, interval: 1000, samples: 10, frames: {} }))
    { ruby => /a text file \(Ruby source code\?\)/, stackprof => /a stackprof dump \(Ruby Marshal data/ }.each do |path, what|
      r = run_cli("report", path)
      assert_equal 1, r.status, r.err
      assert_match(/\Afathom report: #{Regexp.escape(path)}: not a profile Fathom reads: /, r.err)
      assert_match(what, r.err)
      assert_match(/fathom reads pprof profiles \(\.pb\.gz.*\) and Fathom's Firefox Profiler files \(\.json\.gz\)/, r.err)
      refute_match(/wire type|malformed/, r.err)
    end
  end

  # Defect 3: a typo in -o's directory fails; nothing is created.
  def test_an_output_in_a_directory_that_does_not_exist_is_refused
    missing = File.join(@dir, "nonexistent")
    out = File.join(missing, "x.pb.gz")
    err = usage("run", "-o", out, "--", "ruby", "-e", "1")
    assert_match(/--out #{Regexp.escape(out)}: the directory #{Regexp.escape(missing)} does not exist/, err)
    refute File.exist?(missing), "no directory is created"
    assert_match(/the directory .* does not exist/, usage("run", "--mode", "heap,gc", "-o", File.join(missing, "run"), "--", "true"))
    assert_match(/the directory .* does not exist/, usage("merge", "a", "b", "-o", out))
    assert_match(/the directory .* does not exist/, usage("report", "--format", "html", "-o", File.join(missing, "f.html"), "x"))
    assert_match(/the directory .* does not exist/, usage("analyze", "-o", out, "dump.json"))
    refute File.exist?(missing)
    # A file where the directory should be is said as such.
    file = File.join(@dir, "file")
    File.write(file, "")
    assert_match(/the directory #{Regexp.escape(file)} is not a directory/, usage("run", "-o", File.join(file, "x.pb.gz"), "--", "true"))
  end

  # Defect 4: a file name says its format.
  def test_a_json_name_writes_a_firefox_profile_when_the_mode_can
    out = File.join(@dir, "cpu.json.gz")
    r = run_cli("run", "--mode", "cpu", "-o", out, "--", "ruby", "-e", "1")
    assert_equal 0, r.status, r.err
    assert_equal "firefox", r.env["FATHOM_FORMAT"]
    r = run_cli("run", "--mode", "cpu,gc", "-o", out, "--", "ruby", "-e", "1")
    assert_equal ["firefox", out], [r.env["FATHOM_FORMAT"], r.env["FATHOM_OUT"]]
    # One Firefox file holds the heap's allocations too: a .json.gz name fits it.
    r = run_cli("run", "--mode", "cpu,gc,heap", "-o", out, "--", "ruby", "-e", "1")
    assert_equal [0, "firefox"], [r.status, r.env["FATHOM_FORMAT"]], r.err
  end

  def test_a_name_of_the_other_format_is_refused
    assert_match(/--out heap\.json\.gz: a \.json name, but the heap profile is written as pprof \(a \.pb\.gz name\)/,
                 usage("run", "--mode", "heap", "-o", File.join(@dir, "heap.json.gz"), "--", "true"))
    assert_match(/--out cpu\.json\.gz: a \.json name, but the cpu profile is written as pprof \(--format firefox, or a \.pb\.gz name\)/,
                 usage("run", "--mode", "cpu", "--format", "pprof", "-o", File.join(@dir, "cpu.json.gz"), "--", "true"))
    assert_match(/--out gc\.pb\.gz: a pprof name, but --format firefox writes Firefox Profiler JSON/,
                 usage("run", "--mode", "gc", "--format", "firefox", "-o", File.join(@dir, "gc.pb.gz"), "--", "true"))
    # The defaults still hold: a .pb.gz name is pprof, a name without an extension is taken as it is.
    r = run_cli("run", "--mode", "cpu", "-o", File.join(@dir, "cpu.pb.gz"), "--", "true")
    assert_equal ["pprof", 0], [r.env["FATHOM_FORMAT"], r.status]
    r = run_cli("run", "--mode", "cpu", "-o", File.join(@dir, "profile"), "--", "true")
    assert_equal ["pprof", 0], [r.env["FATHOM_FORMAT"], r.status]
  end
end
