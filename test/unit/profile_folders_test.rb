# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/source_code"
require "tmpdir"

# Each profile's code stays in its own folders, checked on the source beside
# the boundary rules (boundary_rule_test.rb; docs/internals/README.md,
# "Layout"): a profile's code (its core folders and its binding folder,
# tests included) includes no other profile's core folder, and the code
# every profile shares (stacks, encoding, labels, C frames...) includes no
# profile at all. What two profiles have in common goes into a shared
# folder (core/stacks/: the stack table, frames, pprof locations), not from
# one profile into the other.
class ProfileFoldersTest < Minitest::Test
  EXT = SourceCode::EXT
  # A profile's core folders.
  PROFILES = {
    "cpu" => %w[cpu],
    "heap" => %w[heap heap_sampling heap_census],
    "gc" => %w[gc],
    "retention" => %w[retention],
  }.freeze
  # Folders that combine profiles, and the profiles each may include, with
  # the reason.
  COMBINING = {
    # One Firefox file for CPU/wall, GC and heap (timeline.md).
    "core/timeline" => %w[cpu gc heap],
    # The offline heap dump builds the same graph, dominators and retention
    # profile as a snapshot (dump.md).
    "core/dump" => %w[retention],
    # The parts of a combined Firefox file each collector adds its window to.
    "ruby/io" => %w[cpu gc heap],
  }.freeze
  # Tests that check what profiles have in common, by folder.
  COMBINING_TESTS = {
    # Request labels on CPU/wall and heap samples alike (labels.md).
    "core/labels" => %w[cpu heap],
    # The bytes every encoder writes, pinned.
    "core/encode" => %w[cpu gc heap retention],
  }.freeze

  def profile_of_folder(folder)
    PROFILES.find { |_, folders| folders.include?(folder) }&.first
  end

  # The profile a core include ("heap_census/live_strata.h") is of, or nil.
  def profile_of_include(path)
    folder = path[%r{\A([a-z_]+)/}, 1]
    folder && profile_of_folder(folder)
  end

  def files_in(dir, tests: true)
    files = Dir[File.join(EXT, dir, "*.{cc,h}")]
    tests ? files : files.reject { |f| f.end_with?("_test.cc") }
  end

  # "<file>:3 includes heap/<header> (heap)" for each include of a
  # profile not in `allowed`.
  def offences(files, allowed)
    SourceCode.includes(files).filter_map do |file, line, path|
      next if path.start_with?("ruby/")

      profile = profile_of_include(path)
      "#{file}:#{line} includes #{path} (#{profile})" if profile && !allowed.include?(profile)
    end
  end

  def core_folders
    Dir[File.join(EXT, "core", "*/")].map { |d| File.basename(d) }.sort - ["testing"]
  end

  def test_a_profile_includes_no_other_profile
    found = PROFILES.flat_map do |profile, folders|
      folders.flat_map { |f| offences(files_in("core/#{f}"), [profile]) } + offences(files_in("ruby/#{profile}"), [profile])
    end
    assert_empty found, "move what two profiles share into a shared folder (core/stacks/, core/encode/, ...)"
  end

  def test_shared_code_includes_no_profile
    shared = core_folders.reject { |f| profile_of_folder(f) }
    assert_includes shared, "stacks"
    found = shared.flat_map do |folder|
      offences(files_in("core/#{folder}", tests: false), COMBINING.fetch("core/#{folder}", [])) +
        offences(files_in("core/#{folder}").select { |f| f.end_with?("_test.cc") },
                 COMBINING.fetch("core/#{folder}", []) + COMBINING_TESTS.fetch("core/#{folder}", []))
    end
    binding = Dir[File.join(EXT, "ruby", "*/")].map { |d| "ruby/#{File.basename(d)}" }
                                            .reject { |d| PROFILES.key?(File.basename(d)) }
    found += binding.flat_map { |dir| offences(files_in(dir), COMBINING.fetch(dir, [])) }
    assert_empty found, "shared code must not depend on a profile"
  end

  # A renamed folder must not quietly leave the rule.
  def test_every_profile_folder_exists
    PROFILES.each do |profile, folders|
      folders.each { |f| assert Dir.exist?(File.join(EXT, "core", f)), "core/#{f}/ (#{profile})" }
      assert Dir.exist?(File.join(EXT, "ruby", profile)), "ruby/#{profile}/"
    end
    COMBINING.merge(COMBINING_TESTS).each_key { |dir| assert Dir.exist?(File.join(EXT, dir)), dir }
  end

  def test_the_rule_sees_an_include_of_another_profile
    Dir.mktmpdir do |dir|
      bad = File.join(dir, "bad.cc")
      File.write(bad, "#include \"cpu/cpu_profile.h\"\n// #include \"heap/heap_rows.h\"\n#include \"stacks/frames.h\"\n")
      assert_equal ["#{bad.delete_prefix("#{EXT}/")}:1 includes cpu/cpu_profile.h (cpu)"], offences([bad], ["heap"])
    end
  end
end
