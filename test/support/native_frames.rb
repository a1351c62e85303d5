# frozen_string_literal: true

require_relative "test_extension"

# Builds and loads the test-only extension test/support/native_frames_ext
# (FathomTest::NativeFrames: the C-frame machinery of
# ext/fathom/core/native/ called from Ruby, for the tests and
# bench/native_capture.rb), through TestExtension. Under the ASan run
# (FATHOM_ASAN=1) it is built with the sanitizers too.
module NativeFrames
  SOURCE = File.expand_path("native_frames_ext", __dir__)
  EXT = File.expand_path("../../ext/fathom", __dir__)
  # The file name of the extension: the innermost frames of a stack it
  # captures are in it.
  SO = "fathom_native_frames.#{RbConfig::CONFIG["DLEXT"]}"

  module_function

  def load_path
    sources = Dir[File.join(SOURCE, "*.cc")] +
              Dir[File.join(EXT, "{core/native,core/native_symbols,core/stacks,core/base,ruby,ruby/runtime}", "*.{cc,h}")]
    env = ENV["FATHOM_ASAN"] == "1" ? { "FATHOM_SANITIZE" => "1" } : {}
    TestExtension.extension("fathom_native_frames", SOURCE, sources, env)
  end

  # Loads it into this process (with Fathom's own extension).
  def require!
    require "fathom"
    $LOAD_PATH.unshift(load_path) unless $LOAD_PATH.include?(load_path)
    require "fathom_native_frames"
  end
end
