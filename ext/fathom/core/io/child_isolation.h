// What a child forked to work on a copy-on-write image of the process
// (the forked retention snapshot and heap dump, core/io/child_process.h)
// does first, so that it holds nothing of the parent's but memory
// (docs/internals/retention.md, "What the child holds").
//
// fork() copies every descriptor, O_CLOEXEC or not (that flag acts at
// exec, and the child never execs): the app's listening sockets, its
// clients' connections, its log files, the flock of the always-on
// directory's .fathom.lock, another thread's temporary file. While the
// child had them, a port the app closed could not be bound again, a
// connection the app closed saw no end of file, and a lock the app let go
// stayed held, for as long as the child ran (up to its deadline, 300 s).
// And a child whose parent was SIGKILLed ran on, holding all of that, with
// nobody left to enforce its deadline.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace fathom {
namespace retention {

// Asks the kernel to SIGKILL this process when its parent goes
// (prctl(PR_SET_PDEATHSIG)), then checks getppid() against `parent`, the
// parent's pid taken before fork(): a parent that died before the prctl
// would never send the signal. Returns false when the parent is already
// gone (the caller _exits at once), true otherwise, also where there is no
// prctl (not Linux: then nothing ends the child with its parent but its
// own end).
//
// PR_SET_PDEATHSIG fires when the *thread* that forked ends, not the
// process (prctl(2)): the caller must fork from a thread that outlives the
// child. ForkAndCollect (ruby/fork/forked_child.h) does: the forking thread
// is the one that waits for the child and reaps it before it returns.
bool DieWithParent(pid_t parent);

// Closes every descriptor but the `count` ones in `keep` (any order, any
// numbers), and points 0, 1 and 2 at /dev/null (closed where /dev/null
// cannot be opened): a stray write to stderr (a library's abort message)
// must neither reach the app's log nor land in a file that took the number
// (but in an AddressSanitizer build, whose reports go to stderr).
// close_range(2) where the kernel has it (Linux 5.9+), else the entries
// of /proc/self/fd, else every number below RLIMIT_NOFILE. Only system
// calls: no allocation, nothing that could wait on a lock another thread
// held at fork time.
void CloseInheritedDescriptors(const int* keep, size_t count);

namespace internal {
// The fallbacks, for tests: each closes the descriptors from `first` up
// that are not in keep (sorted ascending). ByListing returns false when
// /proc/self/fd cannot be read.
bool CloseByListing(int first, const int* keep, size_t count);
void CloseByNumber(int first, const int* keep, size_t count);
}  // namespace internal

}  // namespace retention
}  // namespace fathom
