# frozen_string_literal: true

require "test_helper"

# Every development gem in the Gemfile has an upper bound, so a fresh clone
# resolves the majors the suite was written for on every Ruby (issue: a
# machine-wide minitest 6, without minitest/mock, was picked under 3.3).
class GemfileBoundsTest < Minitest::Test
  GEMFILE = File.expand_path("../../Gemfile", __dir__)

  def test_every_gem_line_has_an_upper_bound
    lines = File.readlines(GEMFILE).grep(/^\s*gem\s/)
    refute_empty lines
    lines.each do |line|
      assert_match(/["'](~>|<=?)\s*\d/, line, "#{line.strip}: needs an upper bound (~> or <)")
    end
  end

  def test_the_loaded_minitest_is_the_major_the_suite_was_written_for
    assert_equal 5, Minitest::VERSION.split(".").first.to_i
    require "minitest/mock"
  end
end
