# frozen_string_literal: true

require "digest"
require "fileutils"
require "open3"
require "rbconfig"
require "tmpdir"

# Builds the test-only native code under test/support/ (never part of the
# gem) once, and finds it again: C extensions (nogvl_ext, native_frames_ext)
# and tools (firefox_format_tool).
#
# A build goes into tmp/test-ext/<RUBY_VERSION>/<name>-<digest>/ of the
# checkout: one per Ruby (an extension linked against one libruby must not
# be loaded by another), and one per content of its sources (a source
# changed since, in test/support or in ext/fathom, gets a new build, never
# a stale one). Two test processes building at once take a lock.
module TestExtension
  ROOT = File.expand_path("../..", __dir__)

  module_function

  # The directory holding the build of `name` from `sources` (whose
  # contents key it), built by the block (given that directory) unless it
  # holds `product` already.
  def built(name, sources, product)
    digest = Digest::SHA256.new
    sources.sort.each { |f| digest << f << "\0" << File.binread(f) }
    dir = File.join(ROOT, "tmp/test-ext", RUBY_VERSION, "#{name}-#{digest.hexdigest[0, 12]}")
    return dir if File.exist?(File.join(dir, product))

    FileUtils.mkdir_p(dir)
    File.open(File.join(dir, ".lock"), File::RDWR | File::CREAT, 0o600) do |lock|
      lock.flock(File::LOCK_EX)
      yield dir unless File.exist?(File.join(dir, product))
    end
    dir
  end

  # An extension: `source_dir` holds its extconf.rb; `sources` every file
  # it compiles (its own and those it takes from ext/fathom). env: for
  # extconf.rb (FATHOM_SANITIZE=1 builds it for the ASan run).
  def extension(name, source_dir, sources, env = {})
    so = "#{name}.#{RbConfig::CONFIG["DLEXT"]}"
    key = sources + [File.join(source_dir, "extconf.rb")]
    label = env.empty? ? name : "#{name}-#{env.map { |k, v| "#{k}=#{v}" }.join(",")}"
    built(label, key, so) do |dir|
      Dir.mktmpdir("#{name}-build") do |work|
        run(env, work, RbConfig.ruby, File.join(source_dir, "extconf.rb"))
        run(env, work, "make", "-j2", "V=0")
        FileUtils.cp(File.join(work, so), dir)
      end
    end
  end

  def run(env, dir, *cmd)
    out, status = Open3.capture2e(env, *cmd, chdir: dir)
    raise "test build failed (#{cmd.join(" ")}):\n#{out}" unless status.success?
  end
end
