# frozen_string_literal: true

# Builds fathom/fathom_ext.so from two source trees:
#   core/<concern>/  pure C++17, no Ruby headers (also built alone by CMake for
#                    GoogleTest); included as "heap/sample_store.h" etc.
#   ruby/<concern>/  the only code that includes Ruby's headers: runtime/ (the
#                    boundary, signals, threads) and one folder per concern
#                    (heap/, cpu/, gc/, retention/, dump/, io/), plus
#                    fathom_ext.cc and init.h at ruby/ itself.
#
# Include paths. The two trees use the same concern names (core/heap/ and
# ruby/heap/), so they cannot both be on the path by their own folder: with
# -I core and -I ruby, "heap/x.h" would mean whichever comes first. Core is
# on the path as -I$(srcdir)/core ("heap/sample_store.h"); the binding only
# through -I$(srcdir) ("ruby/heap/heap_collector.h"), so a binding header is
# always written with its tree. Ruby's own headers also start with "ruby/"
# ("ruby/debug.h") and Ruby's include directories come first on mkmf's path:
# the check below refuses a binding header whose path Ruby already has.
# FATHOM_SANITIZE=1 adds -fsanitize=address,undefined (the suite's ASan step).
require "mkmf"

abort "fathom needs a C++17 compiler (g++ >= 8 or clang++ >= 7)" unless find_executable(RbConfig::CONFIG["CXX"].split.first)

have_library("z", "deflateInit2_", "zlib.h") or abort "fathom needs zlib (apt-get install zlib1g-dev)"
have_library("pthread")
# The heap-dump reader (core/dump/) parses JSON lines with simdjson, vendored
# (vendor/simdjson/README.md says why and from where): every build has
# `fathom analyze`, and the precompiled gem needs no libsimdjson.so.N.
# FATHOM_DUMP_READER=0 builds without the reader and the forked dump writer
# (Fathom.analyze_dump and Fathom.heap_dump then refuse, saying so).
with_dump_reader = ENV["FATHOM_DUMP_READER"] != "0"
unless with_dump_reader
  message "FATHOM_DUMP_READER=0: building without the heap-dump reader and writer (fathom analyze, fathom dump)\n"
end

# Ruby APIs that are only optionally present. Each has a fallback in the
# code, and docs/internals/versions.md, "Ruby versions", says which Ruby versions take which path.
# (ruby/debug.h, rb_gc_location and rb_gc_mark_movable exist in every Ruby
# from our 3.1 floor on: used without a check.)
have_func("rb_postponed_job_preregister", "ruby/debug.h") # 3.3+: ruby/runtime/postponed_job.h
# Exported by libruby but declared in no installed header: we declare our own
# prototypes (ext/fathom/ruby/runtime/ruby_private_api.h) when the linker finds them.
have_func("ruby_thread_has_gvl_p")
# 3.2+: GVL events (READY / RESUMED / SUSPENDED) give the CPU profiler each
# thread's state; on 3.1 it knows only whether a thread is in a blocking region.
have_func("rb_internal_thread_add_event_hook", "ruby/thread.h")
# 3.3+: the stack of another thread (the CPU profiler's last sample of a
# thread still blocked when wall sampling stops).
have_func("rb_profile_thread_frames", "ruby/debug.h")
have_func("rb_obj_memsize_of")
have_func("rb_ractor_local_storage_ptr_newkey", "ruby/ractor.h")  # 3.0+: hooks ignore other Ractors
have_func("rb_objspace_each_objects")               # the live census (ruby/heap/live_census.cc)
have_func("rb_objspace_internal_object_p")
have_func("rb_objspace_reachable_objects_from")      # the retention snapshot's heap walk
have_func("rb_objspace_reachable_objects_from_root")
# The object-id flag that object_id liveness tokens read (LivenessTokens::
# LookupAt). Ruby 4.0 keeps an object's id in its shape instead and its
# public header no longer has the flag (docs/internals/versions.md, "Ruby
# 4.0"): without it that mode is refused, and the extension still builds.
have_const("RUBY_FL_SEEN_OBJ_ID", "ruby.h")
# glibc: gives freed arena memory back after a retention snapshot (Rack endpoint).
have_func("malloc_trim", "malloc.h")

src = File.expand_path(__dir__)
# Every core/<concern>/ folder but testing/ (GoogleTest helpers), ruby/ and
# every ruby/<concern>/ folder. Without simdjson neither dump/ is built.
concerns = ->(tree) { Dir[File.join(src, tree, "*/")].map { |d| "#{tree}/#{File.basename(d)}" } }
dirs = (concerns.("core") - ["core/testing"]).sort
dirs -= ["core/dump"] unless with_dump_reader
dirs += ["ruby"] + concerns.("ruby").sort
dirs -= ["ruby/dump"] unless with_dump_reader
$defs << "-DFATHOM_DUMP_READER" if with_dump_reader
# The vendored simdjson (vendor/simdjson/) is one more object, with
# dump_reader.cc the only file that includes its header.
if with_dump_reader
  dirs << "vendor/simdjson"
  $INCFLAGS << " -I$(srcdir)/vendor/simdjson"
end
# mkmf compiles every object into one build directory under its basename,
# and $(VPATH) finds a source by its basename: names must be unique.
$srcs = dirs.flat_map { |d| Dir[File.join(src, d, "*.{cc,cpp}")].reject { |f| f.end_with?("_test.cc") }.map { |f| File.basename(f) } }
dupes = $srcs.group_by(&:itself).select { |_, v| v.size > 1 }.keys
abort "source file names must be unique across core/ and ruby/: #{dupes.join(', ')}" unless dupes.empty?
# One unit per folder (unity_sources.rb says why): a source gem installs in
# about half the CPU time. FATHOM_UNITY=0 compiles every file alone.
unity_members = {}
if ENV["FATHOM_UNITY"] != "0"
  require_relative "unity_sources"
  $srcs, unity_members = Fathom::UnitySources.new(src: src, dirs: dirs).write
end
ruby_include_dirs = [RbConfig::CONFIG["rubyhdrdir"], RbConfig::CONFIG["rubyarchhdrdir"]].compact
shadowed = Dir[File.join(src, "ruby", "**", "*.h")].map { |f| f.delete_prefix("#{src}/") }
                                                   .select { |rel| ruby_include_dirs.any? { |d| File.exist?(File.join(d, rel)) } }
abort "binding headers hidden by Ruby's own headers of the same path (rename them): #{shadowed.join(', ')}" unless shadowed.empty?
$VPATH.concat(dirs.map { |d| "$(srcdir)/#{d}" })
$INCFLAGS << " -I$(srcdir)/core -I$(srcdir)"

# Three kinds of build (docs/internals/versions.md, "Building the extension"):
#   gem install (the default)  -O2, no debug info: what a user's install
#                              compiles, in as little time as it can
#   FATHOM_DEBUG_INFO=1        -O2 -g: rake compile, for gdb, perf and valgrind
#   FATHOM_SANITIZE=1          -O1 -g with ASan and UBSan (rake compile:asan)
# and FATHOM_PORTABLE=1 on top of the first: the precompiled gem's build
# (rake gem:native), which must load on other Linux distributions.
$CXXFLAGS << " -std=c++17 -fvisibility=hidden -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter"
if ENV["FATHOM_SANITIZE"] == "1"
  # The sanitizer build is the test build: it can also inject C++ failures
  # at FATHOM_FAULT_POINTs (ruby/runtime/boundary.h) to test every door.
  $CXXFLAGS << " -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -DFATHOM_FAULT_INJECTION"
  $LDFLAGS << " -fsanitize=address,undefined"
else
  # -g0 comes after Ruby's own CXXFLAGS (Debian's have -g): debug info made
  # objects compile up to 1.6x longer (simdjson's) and the .so 20 MB larger,
  # and a user's crash report still names our functions from the symbol
  # table, which is kept.
  $CXXFLAGS << (ENV["FATHOM_DEBUG_INFO"] == "1" ? " -O2 -g" : " -O2 -g0")
  # No link-time optimization: it gained too little in exact mode for the
  # time it added to every install (docs/internals/versions.md, "LTO").
end
if ENV["FATHOM_PORTABLE"] == "1"
  # libstdc++ linked in, its symbols kept hidden: the .so then needs no
  # libstdc++ as new as GCC 12's (GLIBCXX_3.4.30) on the machine and cannot
  # clash with another extension's copy. libgcc stays the shared
  # libgcc_s.so.1 that every glibc system has: its static unwinder would
  # need glibc 2.35's _dl_find_object. libruby is not linked:
  # its symbols come from the process that loads us, so the same .so loads
  # into a Ruby built with or without --enable-shared, wherever it lives
  # (no rpath to this machine's /opt/fathom-rubies).
  # --gc-sections drops the parts of the static libstdc++ nothing calls:
  # half its size, and its std::random_device, which needs glibc 2.36's
  # arc4random (the gem's floor is 2.34: docs/internals/versions.md,
  # "The precompiled gem"). Only libdir's -L goes with libruby: mkmf gives
  # it an rpath (/opt/fathom-rubies/<v>/lib) that no user machine has.
  $LDFLAGS << " -static-libstdc++ -Wl,--exclude-libs,ALL -Wl,--gc-sections"
  $LIBRUBYARG = ""
  $LIBRUBYARG_SHARED = ""
  $DEFLIBPATH = $DEFLIBPATH.select { |dir| dir.start_with?(".") }
end
# mkmf links C++ objects with the C compiler driver unless told otherwise.
RbConfig::MAKEFILE_CONFIG["LDSHARED"] = RbConfig::MAKEFILE_CONFIG["LDSHAREDXX"]

create_makefile("fathom/fathom_ext")

require_relative "makefile_wrapper"
# simdjson.o first: the longest object (about 12 s of CPU); make starts
# objects in $(OBJS)'s order, by name, and last it would run alone at the end.
Fathom::MakefileWrapper.new(src: src, headers: dirs.flat_map { |d| Dir[File.join(src, d, "*.h")] }.sort,
                            first: with_dump_reader ? ["simdjson.o"] : [], members: unity_members).write
