# frozen_string_literal: true

require "fileutils"

# Runs a minitest suite as several processes at once (rake test:ruby and
# test:asan). The suite spends about one core (Ruby 3.1: 746 s of CPU in
# 737 s) waiting on the programs it starts, on sleeps and on sampling
# windows, so on two cores two processes take a little over half the time;
# and every test already has to hold beside other load (rates and
# deadlines scale to the CPU a test got), which is what a second process is.
#
# The split is a function of the file list and the number of shards only
# (fixed weights, no timings of an earlier run), so a failure replays:
#   SEED=<seed> FATHOM_TEST_SHARD=2/2 rake test:ruby
# runs shard 2 alone, in the same order. FATHOM_TEST_JOBS=1 runs one process.
module TestShards
  # Files that must share one process, because two processes would race for
  # one thing they use.
  TOGETHER = {
    # The Rails app's SQLite database, which each process prepares once
    # (bin/rails db:prepare); two at once could both load its schema. Its
    # puma clusters are also the suite's heaviest load.
    "rails" => %r{\Atest/rails/|\Atest/hostile/proxy_guard_test\.rb\z},
    # One headless browser at a time, and its screenshots under tmp/viewers.
    "viewers" => %r{\Atest/viewers/},
  }.freeze

  # Seconds a file took (Ruby 3.1, quiet machine, one process); the split
  # balances these. Every other file counts DEFAULT_SECONDS. Stale figures
  # make the shards less even, never wrong.
  SECONDS = {
    "test/rails/push_cluster_test.rb" => 57, "test/integration/gem_install_test.rb" => 60,
    "test/crash/gc_and_retention_test.rb" => 40, "test/crash/cpu_sampling_test.rb" => 38,
    "test/crash/rack_concurrency_test.rb" => 23, "test/integration/leak_verdicts_test.rb" => 23,
    "test/integration/rack_server_test.rb" => 23, "test/integration/heap_dump_test.rb" => 22,
    "test/rails/fathom_run_rails_test.rb" => 21, "test/hostile/option_fuzz_test.rb" => 20,
    "test/viewers/firefox_smoke_test.rb" => 18, "test/integration/always_on_push_test.rb" => 18,
    "test/rails/puma_cluster_test.rb" => 15, "test/crash/stress_test.rb" => 15,
    "test/rails/endpoint_labels_test.rb" => 14, "test/viewers/speedscope_test.rb" => 14,
    "test/viewers/firefox_thread_states_test.rb" => 13, "test/rails/request_profiles_test.rb" => 13,
    "test/crash/retention_fork_test.rb" => 13, "test/hostile/push_bounded_read_test.rb" => 13,
    "test/integration/cpu_profile_test.rb" => 12, "test/hostile/always_on_directory_test.rb" => 12,
    "test/viewers/pprof_web_ui_threads_test.rb" => 12, "test/integration/gc_profile_test.rb" => 12,
    "test/unit/cli_test.rb" => 11, "test/crash/heap_dump_fork_test.rb" => 10,
    "test/hostile/file_fuzz_test.rb" => 10, "test/viewers/pprof_web_ui_demo_test.rb" => 9,
    "test/integration/heap_threads_test.rb" => 9, "test/rails/rack_hosts_test.rb" => 9,
    "test/integration/csv_import_reports_test.rb" => 8, "test/integration/push_pyroscope_test.rb" => 8,
    "test/unit/rack_security_test.rb" => 8, "test/integration/cpu_thread_states_test.rb" => 7,
    "test/integration/heap_census_test.rb" => 7, "test/integration/retention_test.rb" => 6,
    "test/unit/autorun_test.rb" => 6, "test/crash/liveness_test.rb" => 6,
    "test/unit/rack_endpoints_test.rb" => 6, "test/integration/dump_analysis_test.rb" => 6
  }.freeze
  DEFAULT_SECONDS = 2

  RUNS_LINE = /\A(\d+) runs, (\d+) assertions, (\d+) failures, (\d+) errors, (\d+) skips\s*\z/

  module_function

  # `files` in `count` lists, the heaviest units first, each to the lightest
  # shard so far (ties to the lowest index): the same input, the same split.
  def split(files, count)
    units = files.sort.group_by { |f| TOGETHER.find { |_, pattern| pattern.match?(f) }&.first || f }.values
    shards = Array.new(count) { [] }
    loads = Array.new(count, 0)
    units.sort_by { |unit| [-seconds(unit), unit.first] }.each do |unit|
      i = (0...count).min_by { |k| [loads[k], k] }
      shards[i].concat(unit)
      loads[i] += seconds(unit)
    end
    shards.map(&:sort)
  end

  def seconds(unit) = unit.sum { |f| SECONDS.fetch(f, DEFAULT_SECONDS) }

  # "k/n" (FATHOM_TEST_SHARD) as [k, n], or nil.
  def shard_spec(text)
    return nil if text.nil? || text.empty?

    k, n = text.split("/", 2).map { |s| Integer(s, exception: false) }
    raise ArgumentError, "FATHOM_TEST_SHARD must read k/n with 1 <= k <= n, got #{text.inspect}" unless k && n && k.between?(1, n)

    [k, n]
  end

  # Runs every shard at once, each with its output in a log of its own,
  # then prints the logs one after the other and one runs line for all of
  # them (the lines each shard printed are renamed "shard k/n: ...", so the
  # summed one is the only line script/test reads). `command` builds one
  # shard's command line from its files. True when every shard passed.
  def run_all(shards, task:, env:, log_dir:, &command)
    seed = (ENV["SEED"] || Random.new_seed % 0xFFFF).to_s
    current = ENV["FATHOM_TEST_CURRENT"]
    FileUtils.mkdir_p(log_dir)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    jobs = shards.each_with_index.map do |files, i|
      label = "#{i + 1}/#{shards.size}"
      log = File.join(log_dir, "#{task.tr(":", "-")}-#{RUBY_VERSION}-shard#{i + 1}.log")
      shard_env = env.merge("SEED" => seed, "FATHOM_TEST_SHARD" => label,
                            "FATHOM_TEST_REPLAY" => "FATHOM_TEST_SHARD=#{label} rake #{task}")
      shard_env["FATHOM_TEST_CURRENT"] = "#{current}.#{i + 1}" if current
      puts "#{task} shard #{label}: #{files.size} files, output in #{log}"
      pid = Process.spawn(shard_env, *command.call(files), %i[out err] => [log, "w"])
      { label: label, log: log, pid: pid, current: shard_env["FATHOM_TEST_CURRENT"] }
    end
    $stdout.flush
    jobs.size.times do
      pid, status = Process.wait2 # whichever shard ends first: each line says when it did
      job = jobs.find { |j| j[:pid] == pid } or next
      job[:ok] = status.success?
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      how = if job[:ok] then "passed"
            elsif status.exitstatus then "failed, exit #{status.exitstatus}"
            else "killed by signal #{status.termsig}"
            end
      puts format("%s shard %s ended (%s) after %.0fs", task, job[:label], how, took)
      $stdout.flush
    end
    report(jobs, current)
  end

  def report(jobs, current)
    totals = [0] * 5
    died = []
    jobs.each do |job|
      puts
      puts "=== shard #{job[:label]}"
      line = nil
      File.foreach(job[:log]) do |text|
        if (m = RUNS_LINE.match(text))
          line = m
          text = "shard #{job[:label]}: #{text}"
        end
        print text
      end
      if line
        line.captures.each_with_index { |v, i| totals[i] += Integer(v) }
      else
        died << job
      end
    end
    puts
    if died.empty?
      puts format("%d runs, %d assertions, %d failures, %d errors, %d skips", *totals)
    else
      # No runs line: script/test reports a process that died, and the test
      # it died in, from this file.
      names = died.map { |job| File.exist?(job[:current].to_s) ? File.read(job[:current]).strip : "" }
      File.write(current, "#{names.reject(&:empty?).join(", ")} (shard #{died.map { |j| j[:label] }.join(", ")})\n") if current
      puts "shard #{died.map { |j| j[:label] }.join(", ")}: the process ended without a summary"
    end
    jobs.all? { |job| job[:ok] }
  end
end
