# frozen_string_literal: true

require "test_helper"
require "open3"
require "rubygems/package"

# What a user does first, with each of the two packages: install it into an
# empty GEM_HOME, then use it from an unrelated directory with nothing of
# this checkout on the load path: `fathom run --mode heap,gc,retention`,
# `fathom report`, `fathom analyze`, and `require "fathom"` +
# `Fathom.profile`.
#
# The packages come from `rake gem:source gem:native`, which builds them
# from a clean copy of the checkout (rakelib/gem.rake). script/test builds
# them once for the whole run, the precompiled one for every tested Ruby,
# and names their directory in FATHOM_GEM_PKG; without it this test builds
# them itself, the precompiled one for the running Ruby only.
#
# It compiles the extension (the source gem's install; and the packages
# when FATHOM_GEM_PKG is not given): CI runs it on every tested Ruby, a
# local run only when asked (FATHOM_GEM_TEST=1).
class GemInstallTest < Minitest::Test
  ABI = RUBY_VERSION[/\A\d+\.\d+/]
  LEAKY = <<~RUBY
    CACHE = {}
    def handle(i) = CACHE[i] = "session \#{i} " * 20   # never evicted
    300_000.times { |i| handle(i) }
  RUBY
  # A user's installed gem is a few MB (it was 101 MB): no objects, each
  # .so once and without debug info. The source gem holds one .so of
  # ~1.5 MB, the precompiled one a ~3 MB .so per Ruby (libstdc++ inside),
  # and RubyGems keeps the .gem in cache/ too.
  MAX_INSTALLED_BYTES_BESIDE_THE_EXTENSIONS = 6 * 1024 * 1024
  MAX_BYTES_PER_EXTENSION = 4 * 1024 * 1024

  def setup
    skip "compiles the gem: set FATHOM_GEM_TEST=1, or CI=true" unless TestHelper.ci? || ENV["FATHOM_GEM_TEST"] == "1"
    @dir = Dir.mktmpdir("fathom-gem")
    @home = File.join(@dir, "home")
    @work = File.join(@dir, "elsewhere")
    FileUtils.mkdir_p(@work)
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  # Built once per process (both tests use them).
  def self.packages
    @packages ||= begin
      dir = ENV["FATHOM_GEM_PKG"]
      if dir.nil? || dir.empty?
        dir = File.join(Dir.mktmpdir("fathom-pkg"), "pkg")
        env = TestHelper::PLAIN_ENV.merge("FATHOM_GEM_OUT" => dir, "FATHOM_GEM_RUBIES" => ABI)
        out, status = Open3.capture2e(env, RbConfig.ruby, "-S", "rake", "gem:source", "gem:native", chdir: TestHelper::ROOT)
        raise "rake gem:source gem:native failed:\n#{out}" unless status.success?
      end
      {
        source: File.join(dir, "fathom-profiler-#{Fathom::VERSION}.gem"),
        native: File.join(dir, "fathom-profiler-#{Fathom::VERSION}-x86_64-linux.gem"),
      }
    end
  end

  # A clean environment: no Bundler, no RUBYOPT, no RUBYLIB, only the new
  # GEM_HOME, and this Ruby's bin first on PATH.
  def gem_env(extra = {})
    bindir = RbConfig::CONFIG["bindir"]
    TestHelper::PLAIN_ENV.merge("GEM_HOME" => @home, "GEM_PATH" => @home, "RUBYLIB" => nil, "BUNDLE_PATH" => nil,
                                "PATH" => "#{File.join(@home, 'bin')}:#{bindir}:#{ENV.fetch('PATH')}").merge(extra)
  end

  def sh(*cmd, env: {}, chdir: @work)
    out, status = Open3.capture2e(gem_env(env), *cmd, chdir: chdir)
    assert status.success?, "#{cmd.join(' ')} failed:\n#{out}"
    out
  end

  def gem_install(file, env: {})
    assert File.file?(file), "no package #{file}"
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    sh(File.join(RbConfig::CONFIG["bindir"], "gem"), "install", "--local", "--no-document", file, env: env)
    seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    size = Dir.glob(File.join(@home, "**", "*"), File::FNM_DOTMATCH).sum { |f| File.file?(f) ? File.size(f) : 0 }
    warn format("gem install %s on Ruby %s: %.1f s, %.1f MB installed", File.basename(file), RUBY_VERSION,
                seconds, size / 1e6)
    assert_empty Dir.glob(File.join(@home, "**", "*.o")), "object files left in the installed gem"
    sos = Dir.glob(File.join(@home, "**", "fathom_ext.so"))
    limit = MAX_INSTALLED_BYTES_BESIDE_THE_EXTENSIONS + (sos.size * MAX_BYTES_PER_EXTENSION)
    assert_operator size, :<, limit, "installed size with #{sos.size} extension(s)"
    sos
  end

  # The README's quick start and the Ruby API, from @work, with the
  # installed command and library only.
  def use_the_installed_gem
    fathom = File.join(@home, "bin", "fathom")
    assert File.executable?(fathom), "gem install put no fathom command in #{@home}/bin"
    loaded = sh("ruby", "-e", 'require "fathom"; Fathom::NativeLoader.require!; puts $LOADED_FEATURES.grep(%r{/fathom(-profiler|/|\\.rb\\z|_ext)})')
    refute_empty loaded.lines
    loaded.lines.each { |f| assert f.start_with?(@home), "loaded from outside the GEM_HOME: #{f}" }
    # Bundler's auto-require of `gem "fathom-profiler"`.
    assert_match(/^Fathom #{Regexp.escape(Fathom::VERSION)}$/,
                 sh("ruby", "-e", 'require "fathom-profiler"; puts "Fathom #{Fathom::VERSION}"'))

    File.write(File.join(@work, "leaky.rb"), LEAKY)
    out = sh(fathom, "run", "--mode", "heap,gc,retention", "-o", "demo", "--", "ruby", "leaky.rb")
    %w[heap gc retention].each { |kind| assert File.size?(File.join(@work, "demo.#{kind}.pb.gz")), "no #{kind} profile:\n#{out}" }
    assert_match(/String#\*/, sh(fathom, "report", "demo.heap.pb.gz", "--top", "5", "--by", "function"))
    assert_match(/GC profile: .* GCs/, sh(fathom, "report", "demo.gc.pb.gz"))
    assert_match(/CACHE/, sh(fathom, "report", "demo.retention.pb.gz", "--top", "5"))

    # The heap-dump reader is in every build (simdjson is vendored).
    sh("ruby", "-robjspace", "-e", 'CACHE = Array.new(1000) { |i| "s#{i}" }; ' \
                                   'File.open("heap.json", "w") { |f| ObjectSpace.dump_all(output: f) }')
    assert_match(/\ARetention profile: \d+ objects.*^Top 5 retainers/m, sh(fathom, "analyze", "heap.json", "--top", "5"))

    script = <<~RUBY
      require "fathom"
      kept = []
      profile = Fathom.profile(mode: :heap, exact: true) { 2000.times { |i| kept << "row \#{i}" * 4 } }
      puts profile.report(top: 3, by: :function)
    RUBY
    assert_match(/String#\*/, sh("ruby", "-e", script))
  end

  # What a maintainer runs; every RubyGems version the suite tests has its
  # own checks (3.5 added one for repeated metadata URIs).
  def test_gem_build_prints_no_warning
    out = sh("gem", "build", File.join(TestHelper::ROOT, "fathom-profiler.gemspec"), "--output",
             File.join(@dir, "built.gem"), chdir: TestHelper::ROOT)
    assert_match(/Successfully built RubyGem/, out)
    refute_match(/WARNING/, out)
  end

  def test_the_source_gem_compiles_at_install_and_works
    spec = Gem::Package.new(self.class.packages[:source]).spec
    assert_equal "ruby", spec.platform.to_s
    assert_empty spec.files.grep(/\.(so|o)\z/), "build products in the source gem"
    assert_includes spec.files, "ext/fathom/vendor/simdjson/simdjson.cpp"

    sos = gem_install(self.class.packages[:source])
    assert_equal 1, sos.size, "the extension installed once, not: #{sos.join(', ')}"
    assert sos.first.end_with?("/lib/fathom/fathom_ext.so"), sos.first
    log = Dir.glob(File.join(@home, "extensions", "**", "gem_make.out")).first
    assert log, "no gem_make.out"
    refute_match(/warning:/i, File.read(log), "warnings in the extension's build (#{log})")
    use_the_installed_gem
  end

  def test_the_precompiled_gem_installs_without_a_compiler_and_works
    spec = Gem::Package.new(self.class.packages[:native]).spec
    assert_equal "x86_64-linux", spec.platform.to_s
    assert_empty spec.extensions
    assert_empty spec.files.grep(%r{\Aext/.*\.(cc|h|cpp)\z}), "sources in the precompiled gem"
    assert_includes spec.files, "lib/fathom/#{ABI}/fathom_ext.so"

    # No compiler, no make: the install must not build anything.
    sos = gem_install(self.class.packages[:native], env: { "MAKE" => "false", "CC" => "false", "CXX" => "false" })
    mine = sos.find { |f| f.end_with?("/lib/fathom/#{ABI}/fathom_ext.so") }
    assert mine, "no extension for Ruby #{ABI} in #{sos.join(', ')}"
    # Portable (docs/internals/versions.md, "The precompiled gem"):
    # libstdc++ and simdjson inside, libruby from the process, and no glibc
    # symbol newer than 2.34, the floor the README gives.
    needed = `readelf -d #{mine}`.scan(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/).flatten
    refute_empty needed, "readelf found no NEEDED entries in #{mine}"
    assert_empty needed.grep(/libstdc\+\+|libsimdjson|libruby/), "the precompiled .so needs #{needed.join(', ')}"
    glibc = `objdump -T #{mine}`.scan(/GLIBC_(\d+\.\d+)/).flatten.map { |v| Gem::Version.new(v) }.max
    assert_operator glibc, :<=, Gem::Version.new("2.34"), "the precompiled .so needs glibc #{glibc}"
    use_the_installed_gem
  end
end
