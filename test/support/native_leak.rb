# frozen_string_literal: true

require "rbconfig"
require "fileutils"
require "open3"
require "tmpdir"

# Builds the test-only extension test/support/native_leak_ext
# (FathomTest::NativeLeak.leak: memory that C code mallocs and never frees)
# into tmp/test-ext/<RUBY_VERSION>/ of the checkout, once per Ruby, as
# test/support/nogvl_burn.rb builds its own. A fixture run as a child
# process gets the directory with -I (NativeLeak.load_path) and requires
# "native_leak".
module NativeLeak
  SOURCE = File.expand_path("native_leak_ext", __dir__)

  module_function

  def load_path
    dir = File.expand_path("../../tmp/test-ext/#{RUBY_VERSION}", __dir__)
    so = File.join(dir, "native_leak.#{RbConfig::CONFIG["DLEXT"]}")
    return dir if File.exist?(so)

    FileUtils.mkdir_p(dir)
    File.open(File.join(dir, ".lock"), File::RDWR | File::CREAT, 0o600) do |lock|
      lock.flock(File::LOCK_EX)
      build(dir) unless File.exist?(so)
    end
    dir
  end

  def build(dir)
    Dir.mktmpdir("native-leak-build") do |work|
      run(work, RbConfig.ruby, File.join(SOURCE, "extconf.rb"))
      run(work, "make", "V=0")
      FileUtils.cp(File.join(work, "native_leak.#{RbConfig::CONFIG["DLEXT"]}"), dir)
    end
  end

  def run(dir, *cmd)
    out, status = Open3.capture2e(*cmd, chdir: dir)
    raise "test extension build failed (#{cmd.join(" ")}):\n#{out}" unless status.success?
  end
end
