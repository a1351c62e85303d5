# frozen_string_literal: true

# Builds fathom/fathom_ext.so from two source trees:
#   core/<concern>/  pure C++17, no Ruby headers (also built alone by CMake for
#                    GoogleTest); included as "heap/sample_store.h" etc.
#   ruby/            the only code that includes Ruby's headers
# FATHOM_SANITIZE=1 adds -fsanitize=address,undefined (the suite's ASan step).
require "mkmf"

abort "fathom needs a C++17 compiler (g++ >= 8 or clang++ >= 7)" unless find_executable(RbConfig::CONFIG["CXX"].split.first)

have_library("z", "deflateInit2_", "zlib.h") or abort "fathom needs zlib (apt-get install zlib1g-dev)"
have_library("pthread")
# The heap-dump reader (core/dump/) parses JSON lines with simdjson (a C++
# library: only linked here, its header is used by the C++ sources).
# Optional: without it the gem still builds and every profiler works; only
# `fathom analyze` / Fathom.analyze_dump refuse, saying what to install.
with_dump_reader = ENV["FATHOM_DUMP_READER"] != "0" && (pkg_config("simdjson") || have_library("simdjson"))
unless with_dump_reader
  message "simdjson not found: building without the heap-dump reader (apt-get install libsimdjson-dev for fathom analyze)\n"
end

# Ruby APIs that are only optionally present. Each has a fallback in the
# code, and IMPLEMENTATION.md says which Ruby versions take which path.
# (ruby/debug.h, rb_gc_location and rb_gc_mark_movable exist in every Ruby
# from our 3.1 floor on: used without a check.)
have_func("rb_postponed_job_preregister", "ruby/debug.h") # 3.3+: ruby/postponed_job.h
# Exported by libruby but declared in no installed header: we declare our own
# prototypes (ext/fathom/ruby/ruby_private_api.h) when the linker finds them.
have_func("ruby_thread_has_gvl_p")
# 3.2+: GVL events (READY / RESUMED / SUSPENDED) give the CPU profiler each
# thread's state; on 3.1 it knows only whether a thread is in a blocking region.
have_func("rb_internal_thread_add_event_hook", "ruby/thread.h")
# 3.3+: the stack of another thread (the CPU profiler's last sample of a
# thread still blocked when wall sampling stops).
have_func("rb_profile_thread_frames", "ruby/debug.h")
have_func("rb_obj_memsize_of")
have_func("rb_ractor_local_storage_ptr_newkey", "ruby/ractor.h")  # 3.0+: hooks ignore other Ractors
have_func("rb_objspace_each_objects")               # the live census (ruby/live_census.cc)
have_func("rb_objspace_internal_object_p")
have_func("rb_objspace_reachable_objects_from")      # the retention snapshot's heap walk
have_func("rb_objspace_reachable_objects_from_root")
# glibc: gives freed arena memory back after a retention snapshot (Rack endpoint).
have_func("malloc_trim", "malloc.h")

src = File.expand_path(__dir__)
# Every core/<concern>/ folder but testing/ (GoogleTest helpers), and ruby/.
dirs = Dir[File.join(src, "core", "*/")].map { |d| "core/#{File.basename(d)}" }.reject { |d| d == "core/testing" }.sort
dirs.delete("core/dump") unless with_dump_reader
dirs << "ruby"
$srcs = dirs.flat_map { |d| Dir[File.join(src, d, "*.cc")].reject { |f| f.end_with?("_test.cc") }.map { |f| File.basename(f) } }.sort
$srcs.delete("dump_binding.cc") unless with_dump_reader
$defs << "-DFATHOM_DUMP_READER" if with_dump_reader
dupes = $srcs.group_by(&:itself).select { |_, v| v.size > 1 }.keys
abort "source file names must be unique across core/ and ruby/: #{dupes.join(', ')}" unless dupes.empty?
$VPATH.concat(dirs.map { |d| "$(srcdir)/#{d}" })
$INCFLAGS << " -I$(srcdir)/core -I$(srcdir)/ruby"

$CXXFLAGS << " -std=c++17 -fvisibility=hidden -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter"
if ENV["FATHOM_SANITIZE"] == "1"
  # The sanitizer build is the test build: it can also inject C++ failures
  # at FATHOM_FAULT_POINTs (ruby/boundary.h) to test every door.
  $CXXFLAGS << " -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -DFATHOM_FAULT_INJECTION"
  $LDFLAGS << " -fsanitize=address,undefined"
else
  $CXXFLAGS << " -O2 -g"
  # Link-time optimization: the hooks in ruby/ call into core/ (SampleStore,
  # StackTable) once or twice per allocation in exact mode, and across
  # translation units nothing is inlined. With LTO exact mode runs 2.6% fewer
  # instructions per allocation than without (callgrind, 300k allocations,
  # Ruby 3.1), and its wall time is back to what it was before core/ and
  # ruby/ were split. Checked first, so a toolchain without LTO still builds.
  lto = " -flto=auto"
  if ENV["FATHOM_LTO"] != "0" && try_link("int main(void) { return 0; }", lto)
    $CXXFLAGS << lto
    $LDFLAGS << lto
  end
end
# mkmf links C++ objects with the C compiler driver unless told otherwise.
RbConfig::MAKEFILE_CONFIG["LDSHARED"] = RbConfig::MAKEFILE_CONFIG["LDSHAREDXX"]

create_makefile("fathom/fathom_ext")

# mkmf tracks no header dependencies: a changed header would leave stale
# objects with another class layout linked together. Every object depends
# on every header (there are few; a full rebuild takes seconds).
headers = dirs.flat_map { |d| Dir[File.join(src, d, "*.h")] }.sort
File.open("Makefile", "a") do |mk|
  mk.puts
  mk.puts "FATHOM_HEADERS = #{headers.join(' ')}"
  mk.puts "$(OBJS): $(FATHOM_HEADERS) Makefile"
end
