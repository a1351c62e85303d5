# frozen_string_literal: true

# The two packages, each built from a clean copy of the checkout (tracked
# and new files, no build products: a stale lib/fathom/3.1/fathom_ext.so
# or tmp/ can never slip into a gem):
#
#   rake gem:source   pkg/fathom-profiler-<v>.gem               the fallback: compiles at install
#   rake gem:native   pkg/fathom-profiler-<v>-x86_64-linux.gem  the extension prebuilt for each
#                                                               tested Ruby (3.1, 3.3, 3.4)
#   rake gem          both
#
# FATHOM_GEM_RUBIES="3.1 3.3" picks the Rubies of the precompiled gem (each
# found by script/ruby-bin; default: all three, and a missing one fails the
# task, since a release must not lack one silently). FATHOM_GEM_OUT=<dir>
# puts the packages there instead of pkg/. Why our own task and not
# rake-compiler: docs/internals/versions.md, "The precompiled gem".
require "etc"
require "fileutils"
require "rbconfig"
require "rubygems/package"
require "tmpdir"

module FathomGem
  ROOT = File.expand_path("..", __dir__)
  PLATFORM = "x86_64-linux"
  RUBIES = %w[3.1 3.3 3.4].freeze

  module_function

  # A work directory of its own per task run (tmp/gem-*, removed when the
  # package is built): two runs at once (script/test's and a developer's)
  # must not copy over each other's sources.
  def in_work_dir
    FileUtils.mkdir_p(File.join(ROOT, "tmp"))
    work = Dir.mktmpdir("gem-", File.join(ROOT, "tmp"))
    yield work
    FileUtils.rm_rf(work)
  end

  def out_dir
    File.expand_path(ENV.fetch("FATHOM_GEM_OUT", File.join(ROOT, "pkg")))
  end

  # A fresh copy of what `git ls-files` lists (tracked files, and new ones
  # not ignored), as they are in the working tree.
  def export(dir)
    FileUtils.rm_rf(dir)
    files = IO.popen(%w[git ls-files -z --cached --others --exclude-standard], chdir: ROOT, &:read).split("\0")
    raise "git ls-files failed" unless $?.success?

    files.each do |f|
      from = File.join(ROOT, f)
      next unless File.file?(from) # deleted in the working tree

      FileUtils.mkdir_p(File.dirname(File.join(dir, f)))
      FileUtils.cp(from, File.join(dir, f), preserve: true)
    end
    dir
  end

  def spec_in(dir)
    Dir.chdir(dir) { Gem::Specification.load(File.join(dir, "fathom-profiler.gemspec")) } or
      raise "fathom-profiler.gemspec did not load"
  end

  # Gem::Package.build writes into the current directory; the package then
  # moves to out_dir by rename, so a reader never sees half a file there.
  def package(spec, dir)
    FileUtils.mkdir_p(out_dir)
    file = Dir.chdir(dir) { Gem::Package.build(spec) }
    target = File.join(out_dir, File.basename(file))
    File.rename(File.join(dir, file), target)
    puts "built #{target}"
    target
  end

  def rubies
    list = ENV.fetch("FATHOM_GEM_RUBIES", RUBIES.join(" ")).split
    unknown = list - RUBIES
    raise "FATHOM_GEM_RUBIES: #{unknown.join(', ')} is not a tested Ruby (#{RUBIES.join(', ')})" unless unknown.empty?

    list.to_h do |v|
      bin = IO.popen([File.join(ROOT, "script/ruby-bin"), v], &:read).strip
      raise "Ruby #{v} is not built (script/setup builds it)" unless $?.success? && !bin.empty?

      [v, bin]
    end
  end

  # The extension for one Ruby, built by that Ruby's mkmf with
  # FATHOM_PORTABLE=1 (ext/fathom/extconf.rb says what that changes),
  # then stripped of what debug sections the static libstdc++ brings.
  def build_extension(src, version, bin)
    build = File.join(File.dirname(src), "build", version)
    FileUtils.mkdir_p(build)
    env = { "FATHOM_PORTABLE" => "1", "PATH" => "#{bin}:#{ENV.fetch('PATH')}", "MAKEFLAGS" => nil,
            "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil, "BUNDLER_SETUP" => nil }
    Dir.chdir(build) do
      system(env, File.join(bin, "ruby"), File.join(src, "ext/fathom/extconf.rb"), exception: true, out: "extconf.log")
      system(env, "make", "-j#{Etc.nprocessors}", "V=0", exception: true)
    end
    so = File.join(build, "fathom_ext.#{RbConfig::CONFIG['DLEXT']}")
    system("strip", "--strip-debug", so, exception: true)
    so
  end

  def native_spec(spec, versions)
    spec.platform = Gem::Platform.new(PLATFORM)
    spec.extensions = []
    # The sources are not needed, simdjson's licence is (its code is in the .so).
    spec.files = spec.files.reject { |f| f.start_with?("ext/") } + ["ext/fathom/vendor/simdjson/LICENSE"] +
                 versions.map { |v| "lib/fathom/#{v}/fathom_ext.#{RbConfig::CONFIG['DLEXT']}" }
    # Ruby 3.5 will have no build here: it gets the source gem. (A Ruby
    # between two of these, 3.2, still matches; lib/fathom/native.rb then
    # says to install the source gem: docs/internals/versions.md.)
    top = versions.map { |v| Gem::Version.new(v) }.max.segments
    spec.required_ruby_version = [">= #{versions.min_by { |v| Gem::Version.new(v) }}", "< #{top[0]}.#{top[1] + 1}.dev"]
    spec
  end
end

namespace :gem do
  desc "The source gem, from a clean copy of the checkout, into pkg/"
  task :source do
    FathomGem.in_work_dir do |work|
      src = FathomGem.export(File.join(work, "source"))
      FathomGem.package(FathomGem.spec_in(src), src)
    end
  end

  desc "The precompiled x86_64-linux gem (the extension for Ruby 3.1, 3.3 and 3.4), into pkg/"
  task :native do
    raise "the precompiled gem is built on x86_64 Linux" unless RbConfig::CONFIG["host_os"].start_with?("linux") &&
                                                               RbConfig::CONFIG["host_cpu"] == "x86_64"

    rubies = FathomGem.rubies
    FathomGem.in_work_dir do |work|
      src = FathomGem.export(File.join(work, "native"))
      rubies.each do |version, bin|
        puts "=== extension for Ruby #{version} (#{bin})"
        so = FathomGem.build_extension(src, version, bin)
        FileUtils.mkdir_p(File.join(src, "lib/fathom", version))
        FileUtils.cp(so, File.join(src, "lib/fathom", version))
      end
      FathomGem.package(FathomGem.native_spec(FathomGem.spec_in(src), rubies.keys), src)
    end
  end
end

desc "Both gems (gem:source, gem:native) into pkg/"
task gem: %w[gem:source gem:native]
