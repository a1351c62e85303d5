# frozen_string_literal: true

require_relative "../error"
require_relative "../notice"
require_relative "stdlib"
require_relative "../process/held_locks"

module Fathom
  module Files
    # Writes whole files so that readers see either the old content or the new
    # one, never a prefix: the data goes to a temporary file in the same
    # directory (a rename is only atomic within one file system), is fsynced,
    # and is then renamed over the destination.
    #
    # It writes into other people's directories, so it refuses what it must
    # not replace, before writing anything (check_target!, which the CLI also
    # calls before the profiled program starts):
    #   - a symbolic link, a device, a FIFO, a socket or a directory: never;
    #   - an existing regular file: only if Fathom wrote it (a gzip whose
    #     header comment is "fathom", see core/encode/gzip.h, or a Firefox
    #     profile whose meta.product names Fathom), or with overwrite: true;
    #   - a directory that cannot be created or written: refused up front.
    # Files are created 0600 and the directories Fathom creates 0700: a
    # profile holds memory contents (strings, class names, paths). A directory
    # others may write to (group- or world-writable without the sticky bit,
    # where they could remove or replace Fathom's files) is said once per
    # directory (Fathom.notice), not refused.
    # Temporary files are named ".<name>.<pid>.<random>.fathom-tmp". Their
    # writer holds an flock(2) on each from its creation until its name is
    # gone (linked and unlinked, or removed), and one left behind (a writer
    # killed mid-write) is removed by a later writer of the same directory
    # once nobody holds its lock and it has not been written for STALE_AFTER
    # (remove_stale_temps). Not by the pid in its name: a process cannot tell
    # whether another one is alive (containers sharing a volume have pid
    # namespaces of their own, where a live writer's pid is unknown or
    # another process's), and a live dump's temporary file was deleted so.
    module AtomicFile
      TMP_SUFFIX = ".fathom-tmp"
      # Seconds since its last write before an unlocked temporary file is
      # taken for abandoned. The lock is what proves a writer alive; the age
      # covers the moment between creating the file and locking it, and the
      # profiles of an older Fathom sharing the directory, which took no lock
      # but wrote each file in one go (an older Fathom's heap dump, written
      # for minutes, is not covered: its writer proves nothing).
      STALE_AFTER = 60
      # Enough of a file to read a gzip header or a Firefox profile's meta.
      SNIFF_BYTES = 4096

      module_function

      # Writes `data` (a String, written as binary) to `path`, creating parent
      # directories. Returns the absolute path written. Raises Fathom::Error
      # when the target may not be replaced (see above).
      # replace: false never replaces anything (returns nil, writing nothing,
      # when something is at `path`), whatever overwrite says.
      def write(path, data, overwrite: false, replace: true)
        path = check_target!(path, overwrite: overwrite)
        dir = File.dirname(path)
        Stdlib.mkdir_p(dir)
        warn_if_shared(dir)
        remove_stale_temps(dir)
        tmp = File.join(dir, temp_name(File.basename(path)))
        lock = nil
        begin
          # 0600, like Tempfile: only the owner reads a profile.
          # binmode: File::BINARY is 0 on Linux, so with Encoding.default_internal
          # set (Rails sets UTF-8) the gzip bytes were transcoded and raised
          # Encoding::UndefinedConversionError: no file under Rails.
          File.open(tmp, File::WRONLY | File::CREAT | File::EXCL, 0o600, binmode: true) do |f|
            lock = lock_temp(f)
            f.write(data)
            f.flush
            f.fsync
          end
          return nil unless install(tmp, path, overwrite, replace)
        ensure
          # ensure, not rescue: Thread#kill unwinds through here without
          # raising, and a killed writer must not leave its temp file either.
          # After a successful install the temp name is gone (renamed or
          # linked and unlinked).
          File.unlink(tmp) if File.exist?(tmp)
          unlock_temp(lock)
        end
        fsync_dir(dir)
        path
      end

      # Writes `data` to `path`, a name that should not exist yet (the
      # periodic flusher's, new by construction); returns the absolute path.
      # replace: false: nothing that exists at `path` is ever replaced, not
      # even a file Fathom wrote (another process's: two containers with the
      # same pid sharing a directory); nil is returned and nothing written,
      # so that the caller picks another name. replace: true replaces a file
      # Fathom wrote (a pattern without %{index} rotates in place).
      # With the native extension the whole write (temp file, fsync, link) is
      # one call that releases the GVL once: each syscall made from Ruby
      # releases it, and with a busy thread around, every release costs up to
      # a time slice (100 ms) to get it back (core/io/new_file.h). Anything out
      # of the ordinary (the name exists, the directory is missing, no hard
      # links, no extension) goes through #write and its checks. Stale temp
      # files are not looked for here (the flusher does it when it starts).
      def write_new(path, data, replace: true)
        path = File.expand_path(path)
        return write(path, data, replace: replace) unless defined?(Fathom::NativeLoader) && NativeLoader.available?

        dir = File.dirname(path)
        result = Native.write_new_file(dir, File.basename(path), temp_name(File.basename(path)), data)
        return path if result.nil?
        return nil if result == :exists && !replace && lstat(path)
        return write(path, data, replace: replace) unless result.is_a?(Array) # :exists, :no_hard_links

        errno, step = result
        # No such directory, or not one: #write creates it or says what is wrong.
        return write(path, data, replace: replace) if step == "open directory"

        raise SystemCallError.new("fathom: cannot write #{path} (#{step})", errno)
      end

      # ".<name>.<pid>.<random>.fathom-tmp": dot-prefixed so that directory
      # watchers globbing "*.pb.gz" skip it; the pid and the random part keep
      # writers apart (the pid says who wrote it, to a person: cleanup goes by
      # the lock, see remove_stale_temps).
      def temp_name(name)
        ".#{name}.#{Process.pid}.#{Random.urandom(4).unpack1("H*")}#{TMP_SUFFIX}"
      end

      # Takes the writer's lock on a temporary file just created (never
      # waits: the file is new and nobody else's) and returns what holds it
      # until #unlock_temp: a duplicate of the descriptor (the same open
      # file, so the same lock), which lets the writer close `file` (and see
      # a write error NFS reports at close) before the file is linked into
      # place, while the lock lasts until its temporary name is gone.
      def lock_temp(file)
        file.flock(File::LOCK_EX | File::LOCK_NB)
        HeldLocks.hold(file.dup)
      end

      def unlock_temp(lock)
        return unless lock

        HeldLocks.release(lock)
        lock.close unless lock.closed?
      end

      # Returns the absolute path if `path` may be written, else raises
      # Fathom::Error saying why.
      def check_target!(path, overwrite: false)
        path = File.expand_path(path)
        stat = lstat(path)
        if stat
          if stat.symlink?
            raise Error, "fathom: #{path} is a symbolic link; Fathom does not replace links (give the path it points to)"
          end
          raise Error, "fathom: #{path} is #{describe(stat)}, not a regular file; Fathom does not replace it" unless stat.file?
          unless overwrite || written_by_fathom?(path)
            raise Error, "fathom: #{path} exists and Fathom did not write it; refusing to overwrite it " \
                         "(choose another path, or pass overwrite: true / --force)"
          end
        end
        check_dir!(File.dirname(path))
        path
      end

      # Whether the file at `path` is one Fathom wrote: a gzip member whose
      # header comment is "fathom", or an uncompressed Firefox profile whose
      # product names Fathom.
      def written_by_fathom?(path)
        head = File.open(path, "rb") { |f| f.read(SNIFF_BYTES) } || "".b
        return gzip_comment(head) == "fathom" if head.start_with?("\x1f\x8b".b)

        head.start_with?("{") && head.include?('"product":"Fathom')
      rescue SystemCallError, IOError
        false
      end

      # The FCOMMENT of a gzip header (RFC 1952), or nil.
      def gzip_comment(head)
        return nil if head.bytesize < 10

        flags = head.getbyte(3)
        pos = 10
        if flags & 0x04 != 0 # FEXTRA
          return nil if head.bytesize < pos + 2

          pos += 2 + head.getbyte(pos) + (head.getbyte(pos + 1) << 8)
        end
        pos = (head.index("\0".b, pos) || return) + 1 if flags & 0x08 != 0 # FNAME
        return nil if flags & 0x10 == 0 # no FCOMMENT

        stop = head.index("\0".b, pos) or return nil
        head.byteslice(pos, stop - pos)
      end

      # Removes temporary files whose writer is gone: nobody holds their lock
      # and nothing wrote them for STALE_AFTER (see above). What the file
      # proves, not what a pid says: another pid namespace's live writer has
      # a pid that is dead, or someone else's, here. The directory's entries
      # are listed, not globbed: a directory name is any bytes, and Dir.glob
      # read "[" or "{" in it as a pattern (or raised ArgumentError on bytes
      # that are not UTF-8; found by the option fuzzer).
      def remove_stale_temps(dir)
        names = begin
          Dir.children(dir)
        rescue SystemCallError
          return
        end
        names.each do |name|
          next unless name.b.start_with?(".".b) && name.b.end_with?(TMP_SUFFIX.b)

          remove_if_abandoned(File.join(dir.b, name.b)) # names in two encodings would not join
        rescue SystemCallError, IOError
          nil # gone already, or not ours to remove
        end
      end

      # Unlinks `tmp` if it is a regular file last written more than
      # STALE_AFTER ago whose lock this process can take: its writer has
      # ended (a lock dies with the last descriptor of its open file). Holds
      # that lock while it unlinks, and unlinks only the file it locked (not
      # one that took the name meanwhile).
      def remove_if_abandoned(tmp)
        File.open(tmp, File::RDONLY | File::NOFOLLOW | File::NONBLOCK) do |f|
          stat = f.stat
          return unless stat.file? && Time.now - stat.mtime > STALE_AFTER
          return unless f.flock(File::LOCK_EX | File::LOCK_NB)

          now = File.lstat(tmp)
          File.unlink(tmp) if now.ino == stat.ino && now.dev == stat.dev
        end
      end

      # Moves the finished temp file into place; false (temp removed) when
      # something is at `path` and replace is false. A target that was absent
      # is created with link(2), which fails rather than replace a file that
      # appeared meanwhile (then the checks run again); a file system without
      # hard links gets the plain rename (with replace: false, only when
      # nothing was there a moment before: Ruby has no renameat2; the native
      # write_new uses RENAME_NOREPLACE).
      def install(tmp, path, overwrite, replace = true)
        unless lstat(path)
          begin
            File.link(tmp, path)
            File.unlink(tmp)
            return true
          rescue Errno::EEXIST
            check_target!(path, overwrite: overwrite) if replace
          rescue Errno::EPERM, Errno::EOPNOTSUPP, Errno::EXDEV, Errno::EMLINK, NotImplementedError
            nil # no hard links here: rename below
          end
        end
        if !replace && lstat(path)
          File.unlink(tmp)
          return false
        end
        File.rename(tmp, path)
        true
      end

      # Says once per directory when others may write to it: group- or
      # world-writable without the sticky bit (/tmp, 1777, is fine: there
      # only a file's owner may remove or rename it). Not refused: a shared
      # volume may be meant to be shared.
      @warned_dirs = {}
      def warn_if_shared(dir)
        return if @warned_dirs.key?(dir)

        @warned_dirs[dir] = true
        mode = File.stat(dir).mode
        return if mode & 0o1000 != 0 || mode & 0o022 == 0

        who = mode & 0o002 != 0 ? "everyone" : "its group"
        Fathom.notice do
          "fathom: #{dir} is writable by #{who} (mode #{format("%04o", mode & 0o7777)}, no sticky bit): others can " \
            "remove or replace Fathom's profiles there (chmod go-w, or use a directory of your own)"
        end
      rescue SystemCallError
        nil
      end

      # nil when nothing is there (ENOTDIR: a parent is not a directory,
      # which check_dir! then reports). A path that cannot be looked at (a
      # name too long, a loop of links, a parent we may not search) is
      # refused here, as Fathom::Error, rather than as an Errno from deep in a
      # write.
      def lstat(path)
        File.lstat(path)
      rescue Errno::ENOENT, Errno::ENOTDIR
        nil
      rescue SystemCallError => e
        raise Error, "fathom: cannot write #{path}: #{e.message.scrub.sub(/ @ .*\z/m, "")}"
      end

      def describe(stat)
        case stat.ftype
        when "directory" then "a directory"
        when "characterSpecial", "blockSpecial" then "a device"
        when "fifo" then "a FIFO"
        when "socket" then "a socket"
        else "a #{stat.ftype}"
        end
      end

      # The nearest existing ancestor must be a writable directory.
      def check_dir!(dir)
        existing = dir
        existing = File.dirname(existing) until (stat = lstat(existing)) || existing == File.dirname(existing)
        raise Error, "fathom: cannot write into #{dir}: #{existing} is not a directory" unless stat&.directory? || File.directory?(existing)
        raise Error, "fathom: cannot write into #{dir}: #{existing} is not writable" unless File.writable?(existing)
      end

      # Makes the rename itself durable. Best effort: not every platform or
      # file system lets a directory be opened and fsynced.
      def fsync_dir(dir)
        File.open(dir, File::RDONLY) { |d| d.fsync }
      rescue SystemCallError, IOError
        nil
      end
    end
  end
end
