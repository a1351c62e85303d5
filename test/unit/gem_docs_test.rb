# frozen_string_literal: true

require_relative "../test_helper"
require "rubygems"

# The docs that ship in the gem work from the gem: whatever they link to or
# name is in the package too, or is cited by the repository's URL
# (Fathom::REPOSITORY). A user reading docs/production.md in their
# GEM_HOME must not meet a link to docs/internals/serving.md, which is not
# there, nor `bench/rack_load.rb` without saying where it lives.
# test/unit/doc_references_test.rb checks that the URL's path exists here.
class GemDocsTest < Minitest::Test
  ROOT = TestHelper::ROOT
  # Links whose target is a repository URL are the allowed way to cite
  # what does not ship; the link's whole text is taken out before the
  # search for unshipped names below.
  REPO_LINK = %r{\[(?:[^\]]|\][^(])*\]\(#{Regexp.escape(Fathom::REPOSITORY)}(?:/[^)\s]*)?\)}
  LINK = %r{\]\((?<target>[^)\s#]*)(?:\#[^)\s]*)?\)}
  # Names of repository files and folders that a user of the gem does not
  # have: the contributor docs, and what is not packaged.
  UNSHIPPED_NAME = %r{(?<![\w/.-])(?:(?:\.\./)*(?:docs/)?internals/|IMPLEMENTATION\.md|CONTRIBUTING\.md|
                      (?:bench|script|examples|test|\.ci)/[\w./-]*\w)}x

  def spec
    @spec ||= Dir.chdir(ROOT) { Gem::Specification.load(File.join(ROOT, "fathom-profiler.gemspec")) }
  end

  def shipped_docs
    spec.files.select { |f| f.end_with?(".md") && !f.start_with?("ext/") }
  end

  def test_the_gem_ships_the_user_docs_and_not_the_contributor_docs
    %w[README.md CHANGELOG.md LICENSE docs/modes.md docs/cli.md docs/production.md].each do |f|
      assert_includes spec.files, f
    end
    assert_empty spec.files.grep(%r{\A(CONTRIBUTING|IMPLEMENTATION)\.md\z|\Adocs/internals/|\A(bench|test|script|examples)/})
  end

  def test_links_in_shipped_docs_resolve_inside_the_gem
    failures = shipped_docs.flat_map do |doc|
      prose(doc).scan(LINK).flatten.filter_map do |target|
        next if target.empty? || target.match?(/\A[a-z]+:/)

        path = File.expand_path(target, File.join("/", File.dirname(doc))).delete_prefix("/")
        "#{doc}: links to #{target} (#{path}), which is not in the gem" unless spec.files.include?(path)
      end
    end
    assert_empty failures, failures.join("\n")
  end

  def test_unshipped_files_are_cited_by_the_repository_url
    failures = shipped_docs.flat_map do |doc|
      prose(doc).gsub(REPO_LINK, "").scan(UNSHIPPED_NAME).map do |name|
        "#{doc}: names #{name}, which is not in the gem (link it to #{Fathom::REPOSITORY}/blob/main/...)"
      end
    end
    assert_empty failures, failures.uniq.join("\n")
  end

  # The doc without its code fences: a shell session in a fence
  # (`script/demo` under "Developing Fathom") is checked by the prose
  # around it, which must say where such a command runs.
  def prose(doc)
    fence = false
    File.read(File.join(ROOT, doc)).each_line.reject do |line|
      fence = !fence if line.start_with?("```")
      fence || line.start_with?("```")
    end.join
  end
end
