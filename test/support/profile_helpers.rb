# frozen_string_literal: true

require "tmpdir"
require "fileutils"
require "support/pprof_raw"

# Helpers for tests that run the profiler in-process.
module ProfileHelpers
  # Under the ASan/UBSan build everything is several times slower: scale loops down.
  def asan?
    ENV["FATHOM_ASAN"] == "1"
  end

  def scaled(n)
    asan? ? [n / 4, 1].max : n
  end

  # Decodes a Fathom::Profile with go tool pprof -raw.
  def raw_of(profile)
    dir = Dir.mktmpdir("fathom-raw")
    path = File.join(dir, "p.pb.gz")
    File.binwrite(path, profile.bytes)
    PprofRaw.read(path)
  ensure
    FileUtils.rm_rf(dir) if dir
  end

  def with_profiler(**opts)
    profiler = Fathom::HeapProfiler.new(**opts)
    profiler.start
    yield profiler
  ensure
    profiler&.stop
  end
end
