# frozen_string_literal: true

require "test_helper"
require "zlib"

# The files shipped under examples/ (the gzipped ones read unzipped) hold no
# absolute path of the machine that made them: a profile written from a
# checkout records its files' absolute paths (the checkout's, a temporary
# directory's, a home directory's), which mean nothing to a reader and tell
# where someone worked. Example profiles must be written with those
# prefixes cut (script/make-firefox-example).
class ExamplesPathsTest < Minitest::Test
  EXAMPLES = File.join(TestHelper::ROOT, "examples")
  # Where checkouts, temporary files and home directories live (Linux, macOS,
  # CI runners). A path only when it starts there: not "test/tmp/x".
  MACHINE_PATH = Regexp.new(%q{(?<![\w.~/-])/(?:tmp|work|home|root|Users|var/folders|private/var|builds|runner)/[^\s"'<>()\[\]{},]*}.b, Regexp::NOENCODING)
  CHECKOUT = TestHelper::ROOT.b

  def shipped_files
    Dir.glob(File.join(EXAMPLES, "**", "*")).select { |f| File.file?(f) }.sort
  end

  def contents(path)
    bytes = File.binread(path)
    bytes = Zlib.gunzip(bytes) if path.end_with?(".gz")
    bytes.b
  end

  def test_examples_exist
    refute_empty shipped_files
  end

  def test_no_example_holds_an_absolute_path_of_the_machine_that_made_it
    offenders = shipped_files.to_h do |path|
      text = contents(path)
      found = text.scan(MACHINE_PATH).uniq
      found << CHECKOUT if text.include?(CHECKOUT) && found.none? { |p| p.start_with?(CHECKOUT) }
      [path.delete_prefix("#{TestHelper::ROOT}/"), found.map { |p| p.force_encoding(Encoding::UTF_8).scrub }]
    end.reject { |_, found| found.empty? }
    assert_empty offenders, "absolute paths in shipped examples (regenerate them without the machine's paths)"
  end
end
