# frozen_string_literal: true

require "minitest"

# Prints every skip with its reason, grouped by reason, then the slowest
# tests and test files after a run, so a CI log says what did not run on
# this Ruby and why, and where the suite's minutes went (the suite has a time budget: the brief's
# 30 minutes; CI's hard limit is 90 for everything). FATHOM_TEST_TIMES=N
# changes how many lines (0 turns it off).
module Minitest
  # ", shard k/n" in a process that runs one shard of the suite
  # (test/support/test_shards.rb), for the sections below.
  def self.shard_label
    ENV["FATHOM_TEST_SHARD"] ? ", shard #{ENV["FATHOM_TEST_SHARD"]}" : ""
  end

  def self.plugin_fathom_times_init(options)
    count = Integer(ENV.fetch("FATHOM_TEST_TIMES", "15"), exception: false) || 15
    reporter << FathomTimesReporter.new(count) if count.positive?
    reporter << FathomFailuresReporter.new(options[:seed], ENV["FATHOM_TEST_CURRENT"])
  end

  # CI shows only the tail of a run's output, where minitest's own failure
  # report (printed as each test ends, thousands of lines up) never is. This
  # one repeats every failure, briefly, with the seed that replays the run,
  # in a section script/test prints again at the very end. And if the process
  # dies in a test (a crash in the extension), the file named by
  # FATHOM_TEST_CURRENT still names the test that was running.
  class FathomFailuresReporter < AbstractReporter
    MESSAGE_LINES = 8

    def initialize(seed, current_path)
      super()
      @seed = seed
      @current_path = current_path
      @failures = []
    end

    def prerecord(klass, name)
      File.write(@current_path, "#{klass}##{name}\n") if @current_path
    rescue SystemCallError
      nil # a note for crash reports, never a reason for a test to fail
    end

    def record(result)
      @failures << result unless result.passed? || result.skipped?
    end

    def report
      File.write(@current_path, "") if @current_path
      return if @failures.empty?

      puts
      puts "Failed on Ruby #{RUBY_VERSION}#{Minitest.shard_label} (#{@failures.size}), " \
           "replay with SEED=#{@seed}#{" #{ENV["FATHOM_TEST_REPLAY"]}" if ENV["FATHOM_TEST_REPLAY"]}:"
      @failures.each do |result|
        puts "  #{result.klass}##{result.name} [#{result.failure.location.delete_prefix("#{Dir.pwd}/")}]"
        message = result.failure.message.lines.map(&:rstrip).reject(&:empty?)
        message.first(MESSAGE_LINES).each { |line| puts "      #{line[0, 200]}" }
        puts "      ... (#{message.size - MESSAGE_LINES} more lines)" if message.size > MESSAGE_LINES
      end
      puts "End of failures."
    rescue SystemCallError
      nil
    end
  end

  # Minitest's reporters receive each result (its time, class and name).
  class FathomTimesReporter < AbstractReporter
    def initialize(count)
      super()
      @count = count
      @results = []
    end

    def record(result)
      @results << [result.time, "#{result.klass}##{result.name}", result.source_location&.first]
      (@skips ||= []) << ["#{result.klass}##{result.name}", result.failure.message] if result.skipped?
    end

    def report
      return if @results.empty?

      report_skips

      puts
      puts "Slowest tests:"
      @results.max_by(@count, &:first).each { |time, name, _| puts format("  %7.1fs  %s", time, name) }
      puts "Slowest files:"
      by_file = @results.group_by { |_, _, file| file && file.delete_prefix("#{Dir.pwd}/") }
      by_file.map { |file, rows| [rows.sum(&:first), file] }.max_by(@count, &:first).each do |time, file|
        puts format("  %7.1fs  %s", time, file)
      end
    end

    # One line per reason (its first line: a skip message may quote an
    # error), with the tests it skipped.
    def report_skips
      return if @skips.nil? || @skips.empty?

      puts
      puts "Skipped on Ruby #{RUBY_VERSION}#{Minitest.shard_label} (#{@skips.size}), by reason:"
      @skips.group_by { |_, message| message.lines.first.to_s.strip }.sort_by { |_, rows| -rows.size }.each do |reason, rows|
        puts format("  %3d  %s", rows.size, reason)
        rows.first(4).each { |name, _| puts "         #{name}" }
        puts "         ... and #{rows.size - 4} more" if rows.size > 4
      end
    end
  end
end

Minitest.extensions << "fathom_times" unless Minitest.extensions.include?("fathom_times")
