# frozen_string_literal: true

require_relative "test_extension"

# Builds and loads the test-only extension test/support/nogvl_ext
# (FathomTest::NoGvl.burn: a thread on a CPU without the GVL, on every
# Ruby; nogvl_burn.c says why zlib no longer is one on 3.4), through
# TestExtension: once per Ruby and per content of its source.
#
# A fixture run as a child process gets the directory with -I
# (NoGvlBurn.load_path) and requires "nogvl_burn".
module NoGvlBurn
  SOURCE = File.expand_path("nogvl_ext", __dir__)

  module_function

  def load_path
    TestExtension.extension("nogvl_burn", SOURCE, [File.join(SOURCE, "nogvl_burn.c")])
  end

  # Loads it into this process.
  def require!
    $LOAD_PATH.unshift(load_path) unless $LOAD_PATH.include?(load_path)
    require "nogvl_burn"
  end
end
