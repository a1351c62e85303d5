# frozen_string_literal: true

# Once per process: rake gem loads this file again from an exported copy of
# the same tree (rakelib/gem.rake), and Bundler has loaded it already, so a
# second require_relative (another path) would redefine the constants.
require_relative "lib/fathom/version" unless defined?(Fathom::VERSION)

Gem::Specification.new do |spec|
  spec.name = "fathom-profiler"
  spec.version = Fathom::VERSION
  spec.summary = "Production-safe memory, retention, GC, CPU and wall-time profiler for Ruby with a C++ core (pprof, Firefox Profiler)"
  spec.description = <<~DESC
    Fathom samples Ruby allocations with hooks that stay off between samples,
    tracks which sampled objects are still alive, and writes gzipped pprof
    profiles (alloc_objects, alloc_space, inuse_objects, inuse_space) that open
    in go tool pprof, speedscope and Grafana/Pyroscope. It profiles garbage
    collection (GC as its own thread with reason/cause/type, pause percentiles,
    a Firefox Profiler timeline) and explains why objects are still alive:
    reference chains from the GC roots with named edges, dominators and
    retained sizes, and diffs between snapshots. It samples CPU and wall time
    of every Ruby thread, with thread/GVL state and optional C frames.

    The gem is named fathom-profiler (RubyGems' "fathom" is an unrelated
    gem); it provides the Fathom module, `require "fathom"` and the `fathom`
    command.
  DESC
  spec.authors = ["The Fathom developers"]
  spec.license = "MIT"
  spec.homepage = Fathom::REPOSITORY
  # No homepage_uri: the homepage is the source, and RubyGems 3.5+ warns
  # at `gem build` when two URIs of the metadata are the same.
  spec.metadata = {
    "source_code_uri" => Fathom::REPOSITORY,
    "changelog_uri" => "#{Fathom::REPOSITORY}/blob/main/CHANGELOG.md",
    "bug_tracker_uri" => "#{Fathom::REPOSITORY}/issues",
    "documentation_uri" => "#{Fathom::REPOSITORY}/tree/main/docs",
  }
  spec.required_ruby_version = ">= 3.1"
  # What a user needs: the code, the extension's sources (the build of the
  # source gem; rake gem:native swaps them for built .so files), and the
  # user docs. Contributor docs (CONTRIBUTING.md, IMPLEMENTATION.md,
  # docs/internals/), tests, benchmarks, scripts and examples stay in the
  # repository; the shipped docs cite them by its URL
  # (test/unit/gem_docs_test.rb checks that).
  spec.files = Dir["lib/**/*.rb", "exe/*", "README.md", "CHANGELOG.md", "LICENSE", "docs/*.md",
                   "ext/fathom/*.rb", "ext/fathom/{core,ruby}/**/*.{cc,h}", "ext/fathom/vendor/simdjson/*"]
    .reject { |f| f.end_with?("_test.cc") || f.start_with?("ext/fathom/core/testing/") }
  spec.bindir = "exe"
  spec.executables = ["fathom"]
  spec.require_paths = ["lib"]
  spec.extensions = ["ext/fathom/extconf.rb"]
  # No runtime dependencies: the extension links zlib, which Ruby itself
  # links, and compiles the vendored simdjson.
end
