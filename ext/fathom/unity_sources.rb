# frozen_string_literal: true

module Fathom
  # One translation unit per source folder (a "unity" build), for extconf.rb.
  #
  # Why: the extension is ~90 .cc files, and each compile spent ~0.6 s of
  # its ~1 s parsing the same headers (the standard library's, Ruby's); a
  # source gem took over a minute to install on a 2-core machine. Compiling
  # a folder's files as one unit parses them once: about 30 units instead
  # of 90. A folder is one concern (core/heap/, ruby/cpu/), whose files
  # already share headers and names, and mkmf still builds the units in
  # parallel (makefile_wrapper.rb).
  #
  # What it costs: the files of a folder share one scope. A name defined
  # twice (two anonymous-namespace helpers of the same name), or a macro
  # one file defines and another checks, would be a compile error or a
  # change of meaning; the CMake build of core/ (GoogleTest) still compiles
  # every file alone, and the Ruby suite runs this build. A change to one
  # file recompiles its folder.
  #
  # FATHOM_UNITY=0 builds every file as its own unit.
  class UnitySources
    def initialize(src:, dirs:)
      @src = src
      @dirs = dirs
    end

    # Writes unity-<folder>.cc into the current (build) directory for every
    # folder of two or more files and returns [sources for $srcs,
    # {object => the files it includes}] (for the Makefile: the object is
    # rebuilt when one of them changes).
    def write
      srcs = []
      members = {}
      @dirs.each do |dir|
        files = Dir[File.join(@src, dir, "*.{cc,cpp}")].reject { |f| f.end_with?("_test.cc") }.sort
        if files.size < 2
          srcs.concat(files.map { |f| File.basename(f) })
          next
        end
        name = "unity-#{dir.tr("/", "-")}.cc"
        File.write(name, unit_text(dir, files))
        srcs << name
        members[name.sub(/\.cc\z/, ".o")] = files
      end
      [srcs, members]
    end

    private

    def unit_text(dir, files)
      lines = ["// Written by ext/fathom/extconf.rb (unity_sources.rb): #{dir}/ as one unit."]
      lines.concat(files.map { |f| "#include \"#{f}\"" })
      lines.join("\n") + "\n"
    end
  end
end
