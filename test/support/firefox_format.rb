# frozen_string_literal: true

require "json"
require "rbconfig"
require "tempfile"
require_relative "test_extension"

# A structural check of a Firefox Profiler *processed* profile, version 48 —
# the version ext/fathom/core/firefox/firefox_profile.h writes:
#
#   FirefoxFormat.check!(hash)   # raises FirefoxFormat::Invalid, or returns true
#
# The check is the core's (ext/fathom/core/testing/firefox_format_check.h,
# what the GoogleTest tests run), one validator for both languages: the
# Ruby tests run it as a command (test/support/firefox_format_tool/), built
# once by TestExtension. The error message lists every problem found (up to
# 50), each as "path: what", e.g.
# "threads[1].stackTable.prefix[3]: 7 is not < 3 (its own index)".
module FirefoxFormat
  class Invalid < StandardError; end

  VERSION = 48
  TOOL_SOURCE = File.expand_path("firefox_format_tool/firefox_format_check.cc", __dir__)
  CORE = File.expand_path("../../ext/fathom/core", __dir__)

  # The name of a frame's function in thread `t` (a parsed thread Hash).
  def self.func_name(t, frame)
    t["stringArray"][t["funcTable"]["name"][t["frameTable"]["func"][frame]]]
  end

  # The function names of stack index `stack` in thread `t`, leaf first.
  def self.stack_names(t, stack)
    names = []
    while stack
      names << func_name(t, t["stackTable"]["frame"][stack])
      stack = t["stackTable"]["prefix"][stack]
    end
    names
  end

  # profile: the Hash JSON.parse returned, or the JSON text itself.
  def self.check!(profile)
    errors = errors(profile)
    raise Invalid, "not a valid Firefox processed profile (v#{VERSION}):\n#{errors.join("\n")}" unless errors.empty?

    true
  end

  # The problems found, as "path: what" strings (empty when valid).
  def self.errors(profile)
    text = String === profile ? profile : JSON.generate(profile)
    Tempfile.create(["firefox-profile", ".json"]) do |f|
      f.binmode
      f.write(text)
      f.close
      out = IO.popen([tool, f.path], err: %i[child out], &:read)
      status = $?.exitstatus
      raise "#{tool} could not check #{f.path}: #{out}" unless [0, 1].include?(status)

      out.lines(chomp: true)
    end
  end

  # The checker, built with the core's headers.
  def self.tool
    @tool ||= begin
      sources = [TOOL_SOURCE] + Dir[File.join(CORE, "testing", "*.h")]
      dir = TestExtension.built("firefox_format_check", sources, "firefox_format_check") do |into|
        cxx = RbConfig::CONFIG["CXX"].split.first || "c++"
        TestExtension.run({}, into, cxx, "-std=c++17", "-O1", "-I", CORE, TOOL_SOURCE, "-lz", "-o",
                          File.join(into, "firefox_format_check"))
      end
      File.join(dir, "firefox_format_check")
    end
  end
end
