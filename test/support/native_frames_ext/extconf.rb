# frozen_string_literal: true

# Test-only: the C-frame machinery of ext/fathom/core/native/ seen from Ruby
# (native_frames_debug.cc), built by test/support/native_frames.rb, never
# part of the gem. It compiles its own copy of the core and binding sources
# it uses, as the shipped extension does.
require "mkmf"

ext = File.expand_path("../../../ext/fathom", __dir__)
SOURCES = %w[core/native/native_capture.cc core/native/native_stack_resolver.cc core/native/stack_weaver.cc
             core/native_symbols/elf_symbols.cc core/native_symbols/native_symbolizer.cc
             ruby/runtime/boundary.cc ruby/runtime/symbols.cc].freeze
$srcs = ["native_frames_debug.cc"] + SOURCES.map { |f| File.basename(f) }
$VPATH.concat(SOURCES.map { |f| File.join(ext, File.dirname(f)) }.uniq)
$INCFLAGS << " -I#{ext}/core -I#{ext}"
$CXXFLAGS << " -std=c++17 -fvisibility=hidden -fno-omit-frame-pointer -g -Wall -Wno-unused-parameter"
if ENV["FATHOM_SANITIZE"] == "1"
  $CXXFLAGS << " -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined"
  $LDFLAGS << " -fsanitize=address,undefined"
else
  $CXXFLAGS << " -O2"
end
RbConfig::MAKEFILE_CONFIG["LDSHARED"] = RbConfig::MAKEFILE_CONFIG["LDSHAREDXX"]
create_makefile("fathom_native_frames")
