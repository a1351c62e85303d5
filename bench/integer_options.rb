# frozen_string_literal: true

require "optparse"

# A bench's integer options, each with its default, from ARGV:
#   rounds, calls = BenchIntegerOptions.parse(rounds: 15, calls: 100_000)
# reads --rounds N and --calls N, in the order given.
module BenchIntegerOptions
  def self.parse(**defaults)
    values = defaults.dup
    OptionParser.new do |o|
      defaults.each_key { |name| o.on("--#{name.to_s.tr("_", "-")} N", Integer) { |v| values[name] = v } }
    end.parse!
    values.values
  end
end
