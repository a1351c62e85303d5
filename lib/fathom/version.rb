# frozen_string_literal: true

module Fathom
  VERSION = "0.1.0"
  # Where the source, the contributor docs and the benchmarks live: the
  # gemspec's homepage, and the links of the docs that ship in the gem to
  # files that do not (test/unit/gem_docs_test.rb). A placeholder: the
  # project has no public address yet.
  REPOSITORY = "https://github.com/fathom-profiler/fathom"
end
