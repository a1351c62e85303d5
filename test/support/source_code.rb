# frozen_string_literal: true

# Reading the extension's C++ sources for the structure tests
# (test/unit/boundary_rule_test.rb, test/unit/profile_folders_test.rb).
module SourceCode
  EXT = File.expand_path("../../ext/fathom", __dir__)

  module_function

  # [line number, text] of each line with its comments blanked out.
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

  # [file relative to ext/fathom, line, included path] of every quoted
  # #include of the files.
  def includes(files)
    files.flat_map do |f|
      code_lines(f).filter_map do |n, text|
        (m = text.match(/#\s*include\s*"([^"]+)"/)) && [f.delete_prefix("#{EXT}/"), n, m[1]]
      end
    end
  end
end
