# frozen_string_literal: true

require "rbconfig"
require "fileutils"
require "open3"
require "tmpdir"

# Builds and loads the test-only extension test/support/nogvl_ext
# (FathomTest::NoGvl.burn: a thread on a CPU without the GVL, on every
# Ruby; nogvl_burn.c says why zlib no longer is one on 3.4).
#
# The build goes into tmp/test-ext/<RUBY_VERSION>/ of the checkout (one per
# Ruby: an extension linked against one libruby must not be loaded by
# another), once; later calls only check it is there. Two test processes
# building at once take a lock on the directory.
#
# A fixture run as a child process gets the directory with -I
# (NoGvlBurn.load_path) and requires "nogvl_burn".
module NoGvlBurn
  SOURCE = File.expand_path("nogvl_ext", __dir__)

  module_function

  def load_path
    dir = File.expand_path("../../tmp/test-ext/#{RUBY_VERSION}", __dir__)
    so = File.join(dir, "nogvl_burn.#{RbConfig::CONFIG["DLEXT"]}")
    return dir if File.exist?(so)

    FileUtils.mkdir_p(dir)
    File.open(File.join(dir, ".lock"), File::RDWR | File::CREAT, 0o600) do |lock|
      lock.flock(File::LOCK_EX)
      build(dir) unless File.exist?(so)
    end
    dir
  end

  def build(dir)
    Dir.mktmpdir("nogvl-build") do |work|
      run(work, RbConfig.ruby, File.join(SOURCE, "extconf.rb"))
      run(work, "make", "V=0")
      FileUtils.cp(File.join(work, "nogvl_burn.#{RbConfig::CONFIG["DLEXT"]}"), dir)
    end
  end

  def run(dir, *cmd)
    out, status = Open3.capture2e(*cmd, chdir: dir)
    raise "test extension build failed (#{cmd.join(" ")}):\n#{out}" unless status.success?
  end

  # Loads it into this process.
  def require!
    $LOAD_PATH.unshift(load_path) unless $LOAD_PATH.include?(load_path)
    require "nogvl_burn"
  end
end
