# frozen_string_literal: true

require "test_helper"
require "json"

# exe/fathom in a subprocess (with -Ilib), checking exit statuses and messages.
class CLITest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("fathom-cli")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def fathom(*args, **opts)
    TestHelper.run_fathom(*args, **opts)
  end

  def assert_usage_error(pattern, *args)
    out, err, status = fathom(*args)
    assert_equal 2, status.exitstatus, "stdout: #{out}\nstderr: #{err}"
    assert_match pattern, err
    assert_match(/--help` for usage/, err)
  end

  def test_help_and_version
    out, _, status = fathom("--help")
    assert status.success?
    assert_match(/Usage: fathom COMMAND/, out)
    assert_match(/run .*\n.*report/, out)
    out, _, status = fathom("--version")
    assert status.success?
    assert_equal "fathom #{Fathom::VERSION}\n", out
    out, _, status = fathom("run", "--help")
    assert status.success?
    assert_match(/Usage: fathom run \[options\] \[--\] COMMAND/, out)
    assert_match(/--interval DUR/, out)
    out, _, status = fathom("report", "--help")
    assert status.success?
    assert_match(/--sample-index NAME/, out)
    out, _, status = fathom("help", "report")
    assert status.success?
    assert_match(/Usage: fathom report/, out)
  end

  def test_usage_errors
    _, err, status = fathom
    assert_equal 2, status.exitstatus
    assert_match(/Usage: fathom COMMAND/, err)
    assert_usage_error(/fathom: unknown command "frobnicate" \(commands: run, report, diff, merge, analyze, dump, leaks\)/, "frobnicate")
    assert_usage_error(/fathom run: missing COMMAND/, "run")
    assert_usage_error(/fathom run: missing COMMAND/, "run", "-o", "x.pb.gz", "--")
    assert_usage_error(/fathom run: --mode must be one or more of heap, gc, retention, cpu, wall, got "io"/, "run", "--mode", "io", "--", "ruby", "-e", "1")
    # Both are modes, but not together: the message says that rule (issue 43, defect 2).
    assert_usage_error(/fathom run: --mode cpu and wall cannot be profiled together \(one sampler per process\); pick one/,
                       "run", "--mode", "cpu,wall", "--", "ruby", "-e", "1")
    assert_usage_error(/fathom run: --format must be one of pprof, firefox, got "svg"/, "run", "--format", "svg", "--", "true")
    assert_usage_error(/fathom run: --coalesce must be/, "run", "--coalesce", "soon", "--", "true")
    assert_usage_error(/fathom run: --interval must be a positive duration .*got "-1"/, "run", "--interval", "-1", "--", "true")
    assert_usage_error(/fathom run: --interval must be .*got "soon"/, "run", "--interval", "soon", "--", "true")
    assert_usage_error(/fathom run: --interval must be between 10us and 3600s/, "run", "--interval", "1ns", "--", "true")
    assert_usage_error(/fathom run: --max-depth must be in 1..4096, got 0/, "run", "--max-depth", "0", "--", "true")
    assert_usage_error(/fathom run: invalid option: --bogus/, "run", "--bogus", "--", "true")
    assert_usage_error(/fathom run: missing argument: --interval/, "run", "--interval")
    assert_usage_error(/fathom run: --out .* is a directory/, "run", "-o", @dir, "--", "true")
    assert_usage_error(/fathom report: missing FILE/, "report")
    assert_usage_error(/fathom report: too many arguments/, "report", "a", "b")
    assert_usage_error(/fathom report: --top must be an integer of at least 1, got "x"/, "report", "--top", "x", "f")
  end

  def test_run_sets_the_environment_and_keeps_the_exit_status
    script = 'require "json"; File.write(ARGV[0], JSON.dump(ENV.to_h.merge("pid" => Process.pid.to_s))); exit 7'
    result = File.join(@dir, "env.json")
    Dir.mkdir(File.join(@dir, "rel")) # an output's directory must exist (a typo creates none)
    _, err, status = fathom("run", "--exact", "--interval", "2ms", "--max-depth", "64", "-o", "rel/heap.pb.gz",
                            "--", RbConfig.ruby, "-e", script, result, chdir: @dir)
    assert_equal 7, status.exitstatus, err
    env = JSON.parse(File.read(result))
    assert_equal "heap", env["FATHOM_MODE"]
    assert_equal File.join(File.realpath(@dir), "rel/heap.pb.gz"), File.expand_path(env["FATHOM_OUT"])
    assert_equal "1", env["FATHOM_EXACT"]
    assert_equal "1", env["FATHOM_CENSUS"]
    assert_equal "2000000ns", env["FATHOM_INTERVAL"]
    assert_equal "64", env["FATHOM_MAX_DEPTH"]
    assert_equal env["pid"], env["FATHOM_PID"], "exec must keep the pid"
    assert env["RUBYOPT"].start_with?("-I#{TestHelper::LIB} -rfathom/autorun"), env["RUBYOPT"]
  end

  def test_run_defaults
    script = 'print ENV.values_at("FATHOM_OUT", "FATHOM_EXACT", "FATHOM_INTERVAL", "FATHOM_MAX_DEPTH").join(",")'
    out, = fathom("run", RbConfig.ruby, "-e", script, chdir: @dir)
    assert_equal "#{File.join(File.realpath(@dir), "fathom-heap.pb.gz")},0,10000000ns,128", out
  end

  # Bundler's variables are cleared: under `bundle exec` (the suite's own
  # runner) Bundler 2.5 (Ruby 3.3) re-adds -rbundler/setup to the RUBYOPT of
  # every Ruby it sees start while BUNDLE_GEMFILE is set, so the child's
  # RUBYOPT would end with that instead of with what fathom was given.
  def test_run_keeps_existing_rubyopt
    env = TestHelper::PLAIN_ENV.merge("RUBYOPT" => "-W0")
    out, = fathom("run", "--", RbConfig.ruby, "-e", "print ENV['RUBYOPT']", env: env, chdir: @dir)
    assert out.end_with?("-rfathom/autorun -W0"), out
  end

  # `fathom run -o x.rb -- ruby x.rb` used to replace the script with gzip
  # data after the run. Now the run is refused before the program starts.
  def test_run_refuses_to_overwrite_a_file_fathom_did_not_write
    script = File.join(@dir, "x.rb")
    File.write(script, "File.write(#{File.join(@dir, "ran").inspect}, '1')\n")
    _, err, status = fathom("run", "-o", script, "--", RbConfig.ruby, script, env: TestHelper::PLAIN_ENV)
    assert_equal 2, status.exitstatus, err
    assert_match(/x\.rb exists and Fathom did not write it; refusing to overwrite it/, err)
    refute File.exist?(File.join(@dir, "ran")), "the program ran although its profile could not be written"
    assert_equal "File.write(#{File.join(@dir, "ran").inspect}, '1')\n", File.read(script)
  end

  def test_run_refuses_devices_and_links_even_with_force
    _, err, status = fathom("run", "--force", "-o", "/dev/null", "--", RbConfig.ruby, "-e", "1")
    assert_equal 2, status.exitstatus
    assert_match(%r{/dev/null is a device, not a regular file}, err)
    assert File.chardev?("/dev/null")
  end

  def test_run_with_force_replaces_a_foreign_file
    require_native!
    out = File.join(@dir, "heap.pb.gz")
    File.write(out, "not a profile")
    _, err, status = fathom("run", "--force", "-o", out, "--", RbConfig.ruby, "-e", "Array.new(1000) { Object.new }",
                            env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    assert Fathom::Files::AtomicFile.written_by_fathom?(out)
    # Fathom's own file: replaced on the next run without --force.
    _, err, status = fathom("run", "-o", out, "--", RbConfig.ruby, "-e", "1", env: TestHelper::PLAIN_ENV)
    assert status.success?, err
  end

  def test_run_refuses_a_format_the_modes_cannot_write
    assert_usage_error(/--format firefox applies to the gc, cpu and wall modes only, not heap/, "run", "--mode", "heap", "--format", "firefox", "--", "ruby", "-e", "1")
  end

  # A file argument is a file: its content is never taken for another path.
  def test_report_does_not_follow_a_path_inside_the_file
    other = File.join(@dir, "other.pb.gz")
    File.write(other, "x")
    pointer = File.join(@dir, "a.pb")
    File.write(pointer, other)
    _, err, status = fathom("report", pointer)
    assert_equal 1, status.exitstatus
    # A path is text: the message says what the file is, and names the
    # formats Fathom reads.
    assert_match(/\Afathom report: #{Regexp.escape(pointer)}: not a profile Fathom reads: a text file; fathom reads pprof/, err)
  end

  def test_run_missing_command
    _, err, status = fathom("run", "--", "fathom-no-such-command")
    assert_equal 127, status.exitstatus
    assert_match(/command not found: fathom-no-such-command/, err)
  end

  def test_report_prints_the_top_table
    skip_unless_protoc!
    t = TextProfile.new
    t.sample(%w[Foo#bar main], [1, 100, 1, 100], { "class" => "String" })
    t.sample(%w[Baz#qux main], [2, 50, 0, 0], { "class" => "Array" })
    path = File.join(@dir, "p.pb.gz")
    File.binwrite(path, t.gzipped)
    out, err, status = fathom("report", path)
    assert status.success?, err
    assert_match(/^Type: inuse_space$/, out)
    # Rows are sites: the function and its file:line.
    assert_match(/100B\s+100%\s+100%\s+100B\s+100%  Foo#bar app\.rb:\d+$/, out)
    out, = fathom("report", "--sample-index", "alloc_objects", "--top", "1", path)
    assert_match(/^Type: alloc_objects$/, out)
    assert_match(/Showing top 1 nodes out of 3/, out)
    assert_match(/^\s+2 66.67% 66.67%\s+2 66.67%  Baz#qux app\.rb:\d+$/, out)
    refute_match(/Foo#bar/, out.split("By class").first)
  end

  def test_report_errors
    skip_unless_protoc!
    path = File.join(@dir, "p.pb.gz")
    File.binwrite(path, TextProfile.new.sample(%w[a], [1, 1, 1, 1]).gzipped)
    _, err, status = fathom("report", "--sample-index", "cpu", path)
    assert_equal 2, status.exitstatus
    assert_match(/unknown sample_index "cpu" \(available: alloc_objects, alloc_space, inuse_objects, inuse_space\)/, err)

    _, err, status = fathom("report", File.join(@dir, "missing.pb.gz"))
    assert_equal 1, status.exitstatus
    assert_match(/\Afathom report: .*missing.pb.gz: cannot read it: No such file or directory\n\z/, err)

    bad = File.join(@dir, "bad.pb.gz")
    File.binwrite(bad, "\x1f\x8bnope".b)
    _, err, status = fathom("report", bad)
    assert_equal 1, status.exitstatus
    assert_match(/\Afathom report: .*bad.pb.gz: not a valid gzip stream/, err)
  end
end
