# frozen_string_literal: true

require "minitest"

# Prints the slowest tests and test files after a run, so a CI log says
# where the suite's minutes went (the suite has a time budget: the brief's
# 30 minutes; CI's hard limit is 90 for everything). FATHOM_TEST_TIMES=N
# changes how many lines (0 turns it off).
module Minitest
  def self.plugin_fathom_times_init(_options)
    count = Integer(ENV.fetch("FATHOM_TEST_TIMES", "15"), exception: false) || 15
    reporter << FathomTimesReporter.new(count) if count.positive?
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
    end

    def report
      return if @results.empty?

      puts
      puts "Slowest tests:"
      @results.max_by(@count, &:first).each { |time, name, _| puts format("  %7.1fs  %s", time, name) }
      puts "Slowest files:"
      by_file = @results.group_by { |_, _, file| file && file.delete_prefix("#{Dir.pwd}/") }
      by_file.map { |file, rows| [rows.sum(&:first), file] }.max_by(@count, &:first).each do |time, file|
        puts format("  %7.1fs  %s", time, file)
      end
    end
  end
end

Minitest.extensions << "fathom_times" unless Minitest.extensions.include?("fathom_times")
