# frozen_string_literal: true

require_relative "../options"
require_relative "../native"
require_relative "../files/atomic_file"
require_relative "../files/stdlib"
require_relative "../process/ractor_check"
require_relative "../process/ruby_guards"
require_relative "../process/fork_hooks"

module Fathom
  module Profilers
    # Heap dumps in ObjectSpace.dump_all's format, written by a forked child
    # from a copy-on-write image of the heap: the app pauses for fork() only
    # (milliseconds, growing with RSS), not for the walk and the writing
    # (dump_all holds the GVL for ~0.55 s per million objects).
    # `fathom analyze` reads the file as it reads dump_all's.
    #
    #   Fathom.heap_dump("heap.json.gz")        # gzipped: the name ends in .gz
    #   # $ fathom analyze heap.json.gz
    #
    # values: false (the default) leaves strings' contents ("value") out of
    # the dump: a heap holds passwords, tokens and customers' data, and a dump
    # travels (tickets, laptops). Strings keep their "bytesize". values: true
    # writes them, for local debugging. The Rack endpoint never does.
    #
    # What differs from dump_all: no "file"/"line"/"method"/"generation"
    # (allocation tracing keeps them in ext/objspace's private table, which no
    # public API reads) and no "flags", "shape_id", "slot_size",
    # "embedded"/"shared" (internal layout). See docs/internals/dump.md,
    # "Writing dumps: fathom dump".
    module HeapDump
      DEFAULTS = { values: false, gzip: :auto, timeout: 300, force: false }.freeze
      # The child's deadline, in seconds (it is killed and reaped past it).
      TIMEOUT_RANGE = (1..86_400).freeze
      # zlib level 1: the child's time is the dump's wall time, and level 1
      # already shrinks dump_all's text ~8x (level 6 gains ~15% for ~3x the CPU).
      GZIP_LEVEL = 1
      # What the child may map beyond what it inherits: its buffers (2 MiB),
      # zlib's state and Ruby's copy of the heap page list; nothing grows with
      # the heap but that list (8 bytes a page).
      CHILD_MEMORY = 256 << 20

      module_function

      # Writes the dump to `path` atomically (a temp file beside it, renamed
      # once the child succeeded; 0600) and returns its stats: :objects,
      # :roots (root references), :lines, :bytes (written), :fork_ns (the
      # app's pause), :child_ns, :wait_ns, :child_maxrss_kb, :path. gzip:
      # :auto (when path ends in .gz), true or false. force: replace a file
      # Fathom did not write. Raises Fathom::Error when the child failed or
      # ran past `timeout` seconds, or fork() failed (ObjectSpace.dump_all
      # is the in-process alternative); NotImplementedError where the
      # process cannot fork or this Ruby lacks the functions the walk uses.
      def dump(path, **opts)
        Options.check_unknown!(opts, DEFAULTS.keys, "Fathom.heap_dump")
        opts = DEFAULTS.merge(opts)
        path = Options.path("path", path)
        values = Options.boolean("values", opts[:values])
        gzip = gzip_option(opts[:gzip], path)
        timeout = Options.integer("timeout", opts[:timeout], TIMEOUT_RANGE)
        force = Options.boolean("force", opts[:force])
        raise NotImplementedError, "fathom: heap dumps fork, and this platform has no fork()" unless Process.respond_to?(:fork)

        # Other Ractors would change the heap while the child's image is taken.
        RactorCheck.refuse_if_running!("Fathom.heap_dump")
        RubyGuards.refuse_gc!(:dump, "Fathom.heap_dump")
        NativeLoader.require!
        unless Native.respond_to?(:heap_dump_forked)
          raise NotImplementedError, "fathom: this build has no heap-dump support (built with FATHOM_DUMP_READER=0: " \
                                     "reinstall fathom without it)"
        end

        target = Files::AtomicFile.check_target!(path, overwrite: force)
        # A process another thread forks while the child runs must not stay
        # "in progress" for life (ForkHooks runs Native.after_fork_child there).
        ForkHooks.install
        write(target, values, gzip, timeout, force).merge(path: target, values: values, gzip: gzip)
      end

      def gzip_option(gzip, path)
        return path.end_with?(".gz") if Symbol === gzip && gzip == :auto

        Options.boolean("gzip", gzip)
      rescue TypeError
        raise TypeError, "fathom: gzip must be :auto, true or false, got #{Options.describe(gzip)}"
      end

      # The child writes a temp file the parent opened (0600, O_EXCL); the
      # parent moves it into place only once the child said it is complete.
      # The parent holds the temp file's lock (Files::AtomicFile.lock_temp) until
      # then: however long the child takes, a cleanup elsewhere (another
      # container sharing the directory) sees a live writer.
      def write(target, values, gzip, timeout, force)
        dir = File.dirname(target)
        Files::Stdlib.mkdir_p(dir)
        Files::AtomicFile.remove_stale_temps(dir)
        tmp = File.join(dir, Files::AtomicFile.temp_name(File.basename(target)))
        installed = false
        lock = nil
        begin
          stats = File.open(tmp, File::WRONLY | File::CREAT | File::EXCL, 0o600, binmode: true) do |f|
            lock = Files::AtomicFile.lock_temp(f)
            Native.heap_dump_forked(f.fileno, values, gzip ? GZIP_LEVEL : -1, timeout, CHILD_MEMORY)
          end
          installed = Files::AtomicFile.install(tmp, target, force)
        ensure
          # ensure, not rescue: a Thread#kill raises nothing, and its thread
          # must not leave a part of a heap dump behind either.
          File.unlink(tmp) if !installed && File.exist?(tmp)
          Files::AtomicFile.unlock_temp(lock)
        end
        Files::AtomicFile.fsync_dir(dir)
        stats
      end
    end
  end

  # Fathom::Profilers::HeapDump.dump: an ObjectSpace.dump_all-compatible heap dump
  # written by a forked child (the app pauses for fork() only).
  def self.heap_dump(path, **opts)
    Profilers::HeapDump.dump(path, **opts)
  end
end
