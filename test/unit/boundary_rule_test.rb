# frozen_string_literal: true

require_relative "../test_helper"
require "tmpdir"

# The rules that keep C++ and Ruby's C frames apart, checked on the source
# so that a new file cannot quietly break them (IMPLEMENTATION.md, "The
# boundary"):
#  - ext/fathom/core includes no Ruby header: it is plain C++ with its own
#    GoogleTest tests;
#  - in ext/fathom/ruby, only runtime/boundary.{h,cc} may raise, protect, rescue or
#    leave the GVL. Everything else goes through its doors (RubyMethod,
#    Throw*Error, Protect/TryProtect, WithoutGvl, NoThrow), which is what
#    guarantees that no C++ exception unwinds through a Ruby C frame and
#    that no longjmp skips a live C++ destructor.
class BoundaryRuleTest < Minitest::Test
  EXT = File.expand_path("../../ext/fathom", __dir__)
  DOORS = %w[runtime/boundary.h runtime/boundary.cc].freeze
  # Calls that longjmp, catch longjmps, or run code without the GVL.
  FORBIDDEN = /\b(rb_raise|rb_exc_raise|rb_fatal|rb_protect|rb_rescue2?|rb_ensure|rb_jump_tag|
                 rb_thread_call_without_gvl2?|rb_nogvl)\s*\(/x.freeze

  def code_lines(path)
    in_block = false
    File.readlines(path).each_with_index.filter_map do |line, i|
      text = line.dup
      if in_block
        next unless text.include?("*/")

        text = text.split("*/", 2).last
        in_block = false
      end
      text = text.sub(%r{//.*}, "").gsub(%r{/\*.*?\*/}, "")
      if text.include?("/*")
        text = text.split("/*", 2).first
        in_block = true
      end
      [i + 1, text]
    end
  end

  def test_only_the_boundary_raises_protects_or_leaves_the_gvl
    files = Dir[File.join(EXT, "ruby", "**", "*.{cc,h}")].reject { |f| DOORS.include?(f.delete_prefix("#{EXT}/ruby/")) }
    refute_empty files
    offences = files.flat_map do |f|
      code_lines(f).select { |_, text| text.match?(FORBIDDEN) }
                   .map { |n, text| "#{File.basename(f)}:#{n}: #{text.strip}" }
    end
    assert_empty offences, "use boundary.h's doors instead:\n#{offences.join("\n")}"
  end

  def test_the_core_includes_no_ruby_header
    files = Dir[File.join(EXT, "core", "**", "*.{cc,h}")]
    refute_empty files
    offences = files.flat_map do |f|
      code_lines(f).select { |_, text| text.match?(/#\s*include\s*[<"]ruby[.\/]/) }
                   .map { |n, text| "#{f.delete_prefix("#{EXT}/")}:#{n}: #{text.strip}" }
    end
    assert_empty offences
  end

  def test_the_rule_sees_a_violation
    Dir.mktmpdir do |dir|
      path = File.join(dir, "bad.cc")
      File.write(path, "// rb_raise( in a comment is fine\nvoid f() { rb_raise(rb_eArgError, \"x\"); }\n")
      hits = code_lines(path).select { |_, text| text.match?(FORBIDDEN) }
      assert_equal [2], hits.map(&:first)
    end
  end
end
