# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/source_code"
require "tmpdir"

# The rules that keep C++ and Ruby's C frames apart, checked on the source
# so that a new file cannot quietly break them (docs/internals/ruby-binding.md, "The
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
    SourceCode.code_lines(path)
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

  # ext/fathom/ruby/<folder>/: runtime/ is the boundary, signals and threads;
  # the others are concerns. Includes run one way: a concern may include
  # runtime/ and the top (init.h), runtime/ includes no concern, and a
  # concern includes another only where listed here with the reason.
  RUNTIME = "runtime"
  ALLOWED_CROSS_INCLUDES = {
    # The combined Firefox document (Fathom::Native::FirefoxParts) each
    # collector's flush_into adds its window to, and the stamp (who wrote
    # the profile) each flush reads (io/output_stamp_arg.h).
    "heap" => %w[io labels fork], "cpu" => %w[io labels], "gc" => %w[io], "retention" => %w[io fork],
    # fork/: the forked child and the parent's wait, shared by the forked
    # retention snapshot and the forked heap dump (fork/forked_child.h);
    # and what a process forked from the app resets (fork/fork_child_reset.h:
    # the heap flush's census registers there too).
    "dump" => %w[fork],
    # labels/: the request labels current on the sampled thread, read by the
    # SIGPROF handler (cpu) and the NEWOBJ hook of a sampled allocation (heap)
    # on that thread (labels/thread_labels.h).
  }.freeze
  BINDING_INCLUDE = %r{#\s*include\s*"ruby/([a-z_]+)/}.freeze

  def binding_includes(folder)
    Dir[File.join(EXT, "ruby", folder, "*.{cc,h}")].flat_map do |f|
      code_lines(f).filter_map { |n, text| (m = text.match(BINDING_INCLUDE)) && [f.delete_prefix("#{EXT}/"), n, m[1]] }
    end
  end

  def binding_folders
    Dir[File.join(EXT, "ruby", "*/")].map { |d| File.basename(d) }.sort
  end

  def test_the_runtime_includes_no_concern
    offences = binding_includes(RUNTIME).reject { |_, _, to| to == RUNTIME }
    assert_empty offences.map { |f, n, to| "#{f}:#{n} includes ruby/#{to}/" }
  end

  def test_a_concern_includes_no_other_concern_unless_listed
    concerns = binding_folders - [RUNTIME]
    assert_includes concerns, "heap"
    offences = concerns.flat_map do |from|
      allowed = [from, RUNTIME] + ALLOWED_CROSS_INCLUDES.fetch(from, [])
      binding_includes(from).reject { |_, _, to| allowed.include?(to) }
    end
    assert_empty offences.map { |f, n, to| "#{f}:#{n} includes ruby/#{to}/" }
  end

  # Includes between the binding's files run one way too: a unit (a .h and
  # the .cc of the same name) never includes, directly or through others,
  # a unit that includes it. heap/live_census.cc once included
  # heap_collector.h, which includes live_census.h.
  def binding_unit_includes
    Dir[File.join(EXT, "ruby", "**", "*.{cc,h}")].each_with_object(Hash.new { |h, k| h[k] = [] }) do |f, graph|
      unit = f.delete_prefix("#{EXT}/").sub(/\.(cc|h)\z/, "")
      code_lines(f).each do |_, text|
        m = text.match(%r{#\s*include\s*"(ruby/[a-z_/]+)\.h"}) or next
        graph[unit] << m[1] unless m[1] == unit
      end
    end
  end

  # Each cycle once, as the path that closes it.
  def include_cycles(graph)
    state = {}
    cycles = []
    visit = lambda do |unit, path|
      return cycles << (path.drop_while { |u| u != unit } + [unit]) if state[unit] == :open
      return if state[unit] == :done

      state[unit] = :open
      graph[unit].uniq.each { |to| visit.call(to, path + [unit]) }
      state[unit] = :done
    end
    graph.keys.sort.each { |unit| visit.call(unit, []) }
    cycles
  end

  def test_no_binding_files_include_each_other
    graph = binding_unit_includes
    assert_includes graph["ruby/heap/heap_collector"], "ruby/heap/live_census"
    assert_empty include_cycles(graph).map { |c| c.join(" -> ") }, "break these include cycles"
  end

  def test_the_cycle_check_sees_a_cycle
    graph = Hash.new { |h, k| h[k] = [] }.merge("a" => %w[b], "b" => %w[c], "c" => %w[a], "d" => %w[a])
    assert_equal [%w[a b c a]], include_cycles(graph)
  end

  def test_the_core_includes_nothing_from_the_binding
    files = Dir[File.join(EXT, "core", "**", "*.{cc,h}")]
    offences = files.flat_map do |f|
      code_lines(f).select { |_, text| text.match?(%r{#\s*include\s*"ruby/}) }.map { |n, _| "#{f.delete_prefix("#{EXT}/")}:#{n}" }
    end
    assert_empty offences
  end

  MAX_FILES_PER_FOLDER = 15
  MAX_SOURCE_LINES = 600

  # Folders of more than 15 .cc/.h files, and sources (tests and testing/
  # helpers aside) of more than 600 lines.
  def assert_small(folders, sources)
    crowded = folders.map { |d| [d.delete_prefix("#{EXT}/"), Dir[File.join(d, "*.{cc,h}")].size] }
                     .select { |_, n| n > MAX_FILES_PER_FOLDER }
    assert_empty crowded, "split these folders by concern"
    long = sources.reject { |f| f.end_with?("_test.cc") || f.include?("/testing/") }
                  .map { |f| [f.delete_prefix("#{EXT}/"), File.foreach(f).count] }
                  .select { |_, n| n > MAX_SOURCE_LINES }
    assert_empty long, "split these files by job"
  end

  # Small folders and files in the binding: a folder of ~15 files at most, a
  # source file of 600 lines at most.
  def test_folders_and_files_stay_small
    assert_small(Dir[File.join(EXT, "ruby", "*/")] + [File.join(EXT, "ruby/")], Dir[File.join(EXT, "ruby", "**", "*.{cc,h}")])
  end

  # The same sizes in core/, where a folder's count includes its *_test.cc
  # files. core/testing/ (the tests' shared helpers) is exempt from both
  # checks, and so are the tests themselves from the length check.
  def test_core_folders_and_files_stay_small
    folders = Dir[File.join(EXT, "core", "*/")].reject { |d| File.basename(d) == "testing" }
    refute_empty folders
    assert_small(folders, Dir[File.join(EXT, "core", "*", "*.{cc,h}")])
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
