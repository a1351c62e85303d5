# frozen_string_literal: true

require_relative "../test_helper"

# Every section and file that a comment or a doc cites must exist, so that a
# moved file or a renamed heading cannot leave a reader at a dead end.
# The syntax (also in CONTRIBUTING.md, "Citing a doc from code or another doc"):
#
# 1. Doc citations. A doc file name -- README.md, IMPLEMENTATION.md,
#    CONTRIBUTING.md, or a path docs/<name>.md (a citation of the design
#    rules' DESIGN file is flagged: it is not in this repository) -- optionally
#    followed by a section name in double quotes, with only ",", "'s", "("
#    and white space (line breaks and comment markers included) between them:
#
#        // docs/internals/heap.md, "Thinning by bytes"
#        # (docs/internals/ruby-binding.md, "The boundary")
#
#    The file must exist (resolved from the repository's root). The section
#    must be a heading of that file: a Markdown heading, or a line opening
#    with a bold run ("**Memory after serving.**"), compared
#    case-insensitively; the citation may give the heading's start up to a
#    ":", " (", " --" or "." ("Sampled mode" for "## Sampled mode (the
#    default)"). A name directly after a quote character is a string
#    literal (the gemspec's file list), not a citation.
#    In Markdown files, links to a file are checked too: the file relative to
#    the linking file, and an #anchor against its headings' GitHub slugs.
#    A link to the repository's URL (Fathom::REPOSITORY/blob/main/<path>,
#    or /tree/main/ for a folder), which the docs that ship in the gem use
#    for what does not ship, is checked as a link to <path> here.
# 2. Source paths. A repository path starting with ext/, lib/, test/,
#    bench/, script/, exe/ or examples/, or the short forms core/... and
#    ruby/... (under ext/fathom/), must exist when it ends in a source
#    extension (.rb .cc .h .md .js .gz .json) or names a file under script/
#    or exe/. A path followed by *, %, <, { or an ellipsis is a pattern and is
#    skipped, and so is a ruby/... header that is Ruby's own (ruby/debug.h,
#    found in RbConfig's rubyhdrdir).
#
# It reads ext/ (but the vendored simdjson), lib/, test/, script/, bench/,
# exe/, .ci/, rakelib/, docs/, the top-level *.md, Rakefile, Gemfile and
# the gemspec.
class DocReferencesTest < Minitest::Test
  ROOT = TestHelper::ROOT
  SCANNED = %w[ext lib test script bench exe .ci rakelib docs].freeze
  TOP = %w[Rakefile Gemfile].freeze
  BINARY = /\.(gz|so|o|a|png|jpg|sqlite3|lock|pb)\z|package-lock\.json\z/
  SKIP_DIRS = %r{(\A|/)(node_modules|tmp|log)/|\Aext/fathom/vendor/}

  DOC = %r{(?<![\w/.\-"'])(?<file>(?:README|IMPLEMENTATION|CONTRIBUTING|DESIGN)\.md|docs/[\w/\-]+\.md)}
  GAP = %r{(?:'s)?(?:[ \t,(]|\n[ \t]*(?:\#|//|/?\*)?[ \t]*)*}
  SECTION = /"(?<section>[^"\s][^"]{0,119})"/
  CITATION = /#{DOC}(?:#{GAP}#{SECTION})?/
  LINK = %r{\]\((?<target>[^)\s#]*)(?:\#(?<anchor>[^)\s]*))?\)}
  REPOSITORY_PATH = %r{\A#{Regexp.escape(Fathom::REPOSITORY)}/(?:blob|tree)/main/(?<path>.+)\z}
  PATH = %r{(?<![\w/.\-~$])(?<path>(?:ext|lib|test|bench|script|exe|examples|core|ruby)/[\w./+\-]*[\w])(?<after>.?)}
  SOURCE_EXT = /\.(rb|cc|h|md|js|gz|json)\z/
  PATTERN_NEXT = ["*", "%", "<", "{", "…"].freeze

  def files
    @files ||= begin
      list = SCANNED.flat_map { |d| Dir.glob(File.join(ROOT, d, "**", "*"), File::FNM_DOTMATCH) }
      list += Dir[File.join(ROOT, "*.md")] + Dir[File.join(ROOT, "*.gemspec")] + TOP.map { |f| File.join(ROOT, f) }
      list.select { |f| File.file?(f) }
          .map { |f| f.delete_prefix("#{ROOT}/") }
          .reject { |f| f.match?(BINARY) || f.match?(SKIP_DIRS) }
          .uniq.sort
    end
  end

  def text(file)
    t = File.binread(File.join(ROOT, file)).force_encoding(Encoding::UTF_8)
    t.valid_encoding? && !t.include?("\0") ? t : nil
  end

  def line_of(text, offset) = text[0, offset].count("\n") + 1

  def normalize(name)
    name.gsub(/\s*\n\s*(?:#|\/\/|\/?\*)?\s*/, " ").delete("`*").strip.sub(/[.,:;]+\z/, "").downcase
  end

  # Headings of a Markdown file (outside code fences): "#" headings and lines
  # that open with a bold run.
  def headings(file)
    @headings ||= {}
    @headings[file] ||= begin
      fence = false
      (text(file) || "").each_line.filter_map do |line|
        fence = !fence if line.start_with?("```")
        next if fence

        if (m = line.match(/\A\#{1,6}\s+(.+?)\s*#*\s*\z/))
          m[1]
        elsif (m = line.match(/\A\*\*(.+?)\*\*/))
          m[1]
        end
      end.map { |h| normalize(h) }
    end
  end

  def heading?(file, section)
    s = normalize(section)
    headings(file).any? { |h| h == s || (h.start_with?(s) && h[s.size..].match?(/\A(:|\s\(|\s—|\.)/)) }
  end

  def slug(heading)
    heading.downcase.delete("`*").gsub(/[^\p{Alnum}\s_-]/, "").strip.gsub(/\s/, "-")
  end

  def anchors(file)
    fence = false
    (text(file) || "").each_line.filter_map do |line|
      fence = !fence if line.start_with?("```")
      next if fence

      m = line.match(/\A\#{1,6}\s+(.+?)\s*\z/)
      m && slug(m[1])
    end
  end

  def citation_failures
    failures = []
    files.each do |file|
      t = text(file) or next
      t.to_enum(:scan, CITATION).each do
        m = Regexp.last_match
        where = "#{file}:#{line_of(t, m.begin(0))}"
        target = m[:file]
        unless File.file?(File.join(ROOT, target))
          failures << "#{where}: cites #{target}, which is not a file of this repository"
          next
        end
        next unless m[:section]

        unless heading?(target, m[:section])
          failures << "#{where}: cites #{target}, \"#{normalize(m[:section])}\": no such heading there"
        end
      end
      next unless file.end_with?(".md")

      fence = false
      t.each_line.with_index(1) do |line, n|
        fence = !fence if line.start_with?("```")
        next if fence

        line.gsub(/`[^`]*`/) { |c| " " * c.size }.scan(LINK) do
          target, anchor = Regexp.last_match[:target], Regexp.last_match[:anchor]
          in_repository = target.match(REPOSITORY_PATH)
          next if !in_repository && target.match?(%r{\A[a-z]+:}) # http:, mailto:

          path = if in_repository then in_repository[:path]
                 elsif target.empty? then file
                 else File.expand_path(target, File.dirname(File.join(ROOT, file))).delete_prefix("#{ROOT}/")
                 end
          if !File.exist?(File.join(ROOT, path))
            failures << "#{file}:#{n}: links to #{target}, which does not exist"
          elsif anchor && path.end_with?(".md") && !anchors(path).include?(anchor)
            failures << "#{file}:#{n}: links to #{target}##{anchor}: no heading with that anchor"
          end
        end
      end
    end
    failures
  end

  def path_failures
    failures = []
    files.each do |file|
      t = text(file) or next
      t.to_enum(:scan, PATH).each do
        m = Regexp.last_match
        path = m[:path]
        next if PATTERN_NEXT.include?(m[:after])

        next if path.start_with?("ruby/") && File.exist?(File.join(RbConfig::CONFIG["rubyhdrdir"], path))

        path = "ext/fathom/#{path}" if path.start_with?("core/", "ruby/")
        checked = path.match?(SOURCE_EXT) || path.match?(%r{\A(script|exe)/[\w-]+\z})
        next unless checked
        next if File.exist?(File.join(ROOT, path))

        failures << "#{file}:#{line_of(t, m.begin(0))}: mentions #{m[:path]}, which does not exist"
      end
    end
    failures
  end

  def test_every_cited_doc_and_section_exists
    failures = citation_failures
    assert_empty failures, "#{failures.size} citations point nowhere:\n#{failures.uniq.join("\n")}"
  end

  def test_every_mentioned_source_path_exists
    failures = path_failures
    assert_empty failures, "#{failures.size} paths do not exist:\n#{failures.uniq.join("\n")}"
  end
end
