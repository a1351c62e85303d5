# frozen_string_literal: true

require "test_helper"
require "open3"

# What a user does first: build the gem under its published name, install it
# into an empty GEM_HOME (compiling the extension as `gem install` does on
# their machine), then follow the README's quick start with the installed
# `fathom` command only. Nothing from this checkout is on the load path.
#
# It compiles the whole extension (about 100 s on this project's VMs), so
# it runs once per suite, on Debian's Ruby 3.1 (the other Ruby's build is
# what the rest of the suite exercises), and locally only when asked
# (FATHOM_GEM_TEST=1).
class GemInstallTest < Minitest::Test
  LEAKY = <<~RUBY
    CACHE = {}
    def handle(i) = CACHE[i] = "session \#{i} " * 20   # never evicted
    300_000.times { |i| handle(i) }
  RUBY

  def setup
    skip "once per suite: on Ruby 3.1" unless RUBY_VERSION.start_with?("3.1.")
    skip "compiles the gem (~100 s): set FATHOM_GEM_TEST=1, or CI=true" unless TestHelper.ci? || ENV["FATHOM_GEM_TEST"] == "1"
    @dir = Dir.mktmpdir("fathom-gem")
    @home = File.join(@dir, "home")
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  # A clean environment: no Bundler, no RUBYOPT, only the new GEM_HOME.
  def gem_env
    TestHelper::PLAIN_ENV.merge("GEM_HOME" => @home, "GEM_PATH" => @home, "RUBYLIB" => nil,
                                "PATH" => "#{File.join(@home, "bin")}:#{ENV.fetch("PATH")}", "MAKEFLAGS" => "-j2")
  end

  def sh(*cmd, chdir: @dir)
    out, status = Open3.capture2e(gem_env, *cmd, chdir: chdir, unsetenv_others: false)
    assert status.success?, "#{cmd.join(" ")} failed:\n#{out}"
    out
  end

  def test_the_published_name_installs_a_working_fathom
    gem = File.join(@dir, "fathom-profiler.gem")
    out = sh("gem", "build", "fathom-profiler.gemspec", "--output", gem, chdir: TestHelper::ROOT)
    assert_match(/Name: fathom-profiler$/, out)
    sh("gem", "install", "--local", "--no-document", gem)
    fathom = File.join(@home, "bin", "fathom")
    assert File.executable?(fathom), "gem install put no fathom command in #{@home}/bin"

    assert_match(/^"#{Regexp.escape(Fathom::VERSION)}"$/, sh("ruby", "-e", 'require "fathom"; p Fathom::VERSION'))
    # Bundler's auto-require of `gem "fathom-profiler"`.
    assert_match(/^Fathom$/, sh("ruby", "-e", 'require "fathom-profiler"; p Fathom'))
    loaded = sh("ruby", "-e", 'require "fathom"; puts $LOADED_FEATURES.grep(/fathom_ext/)')
    assert loaded.start_with?(@home), "the extension came from elsewhere: #{loaded}"

    # The README's quick start, with the installed command.
    File.write(File.join(@dir, "leaky.rb"), LEAKY)
    sh(fathom, "run", "--mode", "heap,gc", "-o", "demo", "--", "ruby", "leaky.rb")
    report = sh(fathom, "report", "demo.heap.pb.gz", "--top", "5", "--by", "function")
    assert_match(/String#\*/, report)
    assert_match(/GC profile: .* GCs/, sh(fathom, "report", "demo.gc.pb.gz"))
  end
end
