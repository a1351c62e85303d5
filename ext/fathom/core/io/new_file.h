// Writing a file that must not exist yet, in one call with no Ruby in it.
//
// The periodic flusher writes a new file every interval. Done in Ruby, each
// step (open, write, fsync, close, link, unlink, fsync of the directory)
// releases the GVL, and a thread that releases the GVL while another thread
// runs Ruby code gets it back only at that thread's next time slice (100 ms
// on Ruby 3.1 and 3.3): a dozen syscalls made the write alone take ~1.5 s
// with a busy main thread. ruby/io/write_new_file.cc runs WriteNewFile with
// the GVL released once for all of them.
//
// The protocol is lib/fathom/files/atomic_file.rb's for a target that is absent:
// the data goes to `tmp_name` (created exclusively, not following links),
// is fsynced, and is linked to `name`; link(2) fails rather than replace
// anything that exists under `name`, file or link (where the file system has
// no hard links, renameat2(RENAME_NOREPLACE) does the same). The file is
// created 0600. Whatever fails, the temporary file is removed. From its
// creation until its name is gone the temporary file is flock(2)ed: the
// proof of a live writer that lib/fathom/files/atomic_file.rb's cleanup
// of abandoned temporary files looks for (a pid cannot tell, across pid
// namespaces).
#pragma once

#include <cstddef>
#include <string>

namespace fathom {

struct NewFileResult {
  enum Status {
    kWritten,     // dir/name now holds the data
    kExists,      // something is at dir/name already: nothing was written
    kNoHardLinks, // the file system cannot link: nothing was written (use rename)
    kFailed,      // error (errno) in step: nothing was written
  };
  Status status = kFailed;
  int error = 0;
  const char* step = "";  // "open directory", "open", "write", "fsync", "close", "link"
};

// dir: an existing directory; name and tmp_name: plain file names in it
// (no '/'). The directory is fsynced after the link, best effort.
NewFileResult WriteNewFile(const std::string& dir, const std::string& name, const std::string& tmp_name,
                           const char* data, size_t size);

}  // namespace fathom
