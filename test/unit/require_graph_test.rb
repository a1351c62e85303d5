# frozen_string_literal: true

require_relative "../test_helper"

# lib/'s require graph, read from the source: every `require_relative` and
# every `require "fathom/..."` that names a file of lib/, wherever it is
# written (a require inside a method counts: it runs, later, and a circle
# closed there is still a circle). Checked so that a new file cannot
# quietly bring back what issue 42 removed:
#  - no circle: no file requires, directly or through others, a file that
#    requires it back (lib/fathom.rb requires the Railtie, so what the
#    Railtie loads requires lib/fathom/api.rb, never lib/fathom.rb);
#  - rack/ reaches nothing in always_on/: the endpoints and the always-on
#    profiler share files/, process_comments.rb and the rest, not each
#    other's folders.
class RequireGraphTest < Minitest::Test
  LIB = File.expand_path("../../lib", __dir__)
  REQUIRE = /^\s*(?:[^#"']*?[\s;(])?(require_relative|require)\s*\(?\s*["']([^"']+)["']/.freeze

  # {absolute path => [absolute paths it requires]}, lib/ files only.
  def graph
    @graph ||= Dir[File.join(LIB, "**", "*.rb")].sort.to_h do |file|
      targets = File.foreach(file).filter_map do |line|
        next if line.lstrip.start_with?("#")

        kind, name = line.match(REQUIRE)&.captures
        next unless kind

        resolve(file, kind, name)
      end
      [file, targets.uniq]
    end
  end

  def resolve(file, kind, name)
    base = kind == "require_relative" ? File.dirname(file) : LIB
    path = File.expand_path(name, base)
    path += ".rb" unless path.end_with?(".rb")
    File.file?(path) ? path : nil
  end

  def rel(path) = path.delete_prefix("#{LIB}/")

  # Each circle as its files in order, found by depth-first search.
  def cycles
    found = []
    state = {}
    stack = []
    visit = lambda do |node|
      state[node] = :open
      stack.push(node)
      graph.fetch(node, []).each do |succ|
        if state[succ] == :open
          found << stack[stack.index(succ)..] + [succ]
        elsif state[succ].nil?
          visit.call(succ)
        end
      end
      stack.pop
      state[node] = :done
    end
    graph.each_key { |node| visit.call(node) unless state[node] }
    found
  end

  def test_the_graph_is_read
    assert_operator graph.size, :>, 100
    # Spot checks that the parser resolves the forms lib/ uses.
    assert_includes graph.fetch(File.join(LIB, "fathom.rb")), File.join(LIB, "fathom/api.rb")
    assert_includes graph.fetch(File.join(LIB, "fathom.rb")), File.join(LIB, "fathom/railtie.rb") # `if defined?(...)`
    assert_includes graph.fetch(File.join(LIB, "fathom-profiler.rb")), File.join(LIB, "fathom.rb") # require "fathom"
    assert_includes graph.fetch(File.join(LIB, "fathom/railtie.rb")), File.join(LIB, "fathom/rack.rb") # inside a method
  end

  def test_no_require_circle
    assert_empty cycles.map { |c| c.map { |f| rel(f) }.join(" -> ") }
  end

  def test_the_checker_finds_a_circle
    @graph = { "a" => ["b"], "b" => ["c"], "c" => ["a"], "d" => ["a"] }
    assert_equal [%w[a b c a]], cycles
  end

  def test_rack_does_not_reach_into_always_on
    links = graph.select { |file, _| rel(file).start_with?("fathom/rack/") }.flat_map do |file, targets|
      targets.select { |t| rel(t).start_with?("fathom/always_on/") }.map { |t| "#{rel(file)} -> #{rel(t)}" }
    end
    assert_empty links
  end
end
