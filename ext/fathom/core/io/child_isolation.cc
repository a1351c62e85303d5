#include "io/child_isolation.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cerrno>
#include <climits>
#include <cstdint>

namespace fathom {
namespace retention {
namespace {

// The callers keep one or two descriptors (the result pipe, a dump's
// file); more than this many are kept all the same, by the slower checks.
constexpr size_t kMaxKeep = 16;
// The highest number CloseByNumber tries when RLIMIT_NOFILE says nothing
// useful (Linux's own ceiling, fs.nr_open, defaults to 2^20).
constexpr rlim_t kMaxNumber = rlim_t{1} << 20;

bool Kept(int fd, const int* keep, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (keep[i] == fd) return true;
  return false;
}

// keep's first kMaxKeep entries, ascending, into out (insertion sort: no
// allocation in a forked child). Returns how many.
size_t SortKeep(const int* keep, size_t count, int* out) {
  size_t n = 0;
  for (size_t i = 0; i < count && n < kMaxKeep; i++) {
    size_t j = n++;
    while (j > 0 && out[j - 1] > keep[i]) {
      out[j] = out[j - 1];
      j--;
    }
    out[j] = keep[i];
  }
  return n;
}

// close_range(2) through syscall(2): glibc's wrapper (2.34) is newer than
// some systems this builds on. -1/ENOSYS where the kernel has none.
int CloseRange(unsigned first, unsigned last) {
#if defined(__linux__) && defined(SYS_close_range)
  return static_cast<int>(syscall(SYS_close_range, first, last, 0u));
#else
  (void)first;
  (void)last;
  errno = ENOSYS;
  return -1;
#endif
}

// Whether stderr stays the parent's: in a sanitizer build (the crash
// tests' and the core tests'), where an AddressSanitizer report in the
// child is the point of the run and goes to fd 2.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kKeepStderr = true;
#else
constexpr bool kKeepStderr = false;
#endif

// 0, 1 and 2 onto /dev/null (or closed), but those the caller keeps.
void RedirectStdio(const int* keep, size_t count) {
  int null_fd = open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2; fd++) {
    if (Kept(fd, keep, count) || fd == null_fd || (fd == 2 && kKeepStderr)) continue;
    if (null_fd >= 0)
      dup2(null_fd, fd);
    else
      close(fd);
  }
  if (null_fd > 2) close(null_fd);
}

// A directory entry as getdents64(2) returns it.
struct Dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

// "17" -> 17; -1 for anything else ("." and "..").
int ParseFd(const char* name) {
  if (*name == 0) return -1;
  long v = 0;
  for (const char* p = name; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
    if (v > INT_MAX) return -1;
  }
  return static_cast<int>(v);
}

}  // namespace

bool DieWithParent(pid_t parent) {
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  // After the prctl: a parent that dies from here on sends the signal; one
  // that died before has made this process init's (or a subreaper's).
  return getppid() == parent;
}

namespace internal {

bool CloseByListing(int first, const int* keep, size_t count) {
#if defined(__linux__) && defined(SYS_getdents64)
  int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  // Closing entries while listing is safe here: /proc/self/fd is listed
  // by descriptor number, so what is closed shifts nothing after it.
  alignas(8) char buf[4096];
  bool listed = false;
  for (;;) {
    long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && !listed) {
      close(dir);
      return false;
    }
    if (n <= 0) break;
    listed = true;
    for (long off = 0; off < n;) {
      const Dirent64* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->reclen;
      int fd = ParseFd(d->name);
      if (fd < first || fd == dir || Kept(fd, keep, count)) continue;
      close(fd);
    }
  }
  close(dir);
  return true;
#else
  (void)first;
  (void)keep;
  (void)count;
  return false;
#endif
}

void CloseByNumber(int first, const int* keep, size_t count) {
  struct rlimit limit;
  rlim_t top = kMaxNumber;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < top)
    top = limit.rlim_cur;
  for (rlim_t fd = static_cast<rlim_t>(first); fd < top; fd++)
    if (!Kept(static_cast<int>(fd), keep, count)) close(static_cast<int>(fd));
}

}  // namespace internal

void CloseInheritedDescriptors(const int* keep, size_t count) {
  int sorted[kMaxKeep] = {};
  size_t n = SortKeep(keep, count, sorted);
  if (n < count) {
    // More than this file sorts: keep them all with the slower paths.
    RedirectStdio(keep, count);
    if (!internal::CloseByListing(3, keep, count)) internal::CloseByNumber(3, keep, count);
    return;
  }
  RedirectStdio(sorted, n);
  // The gaps between kept descriptors (3 and up), then everything above.
  unsigned low = 3;
  bool ranged = true;
  for (size_t i = 0; i < n && ranged; i++) {
    if (sorted[i] < static_cast<int>(low)) continue;  // 0-2, or a repeat
    unsigned k = static_cast<unsigned>(sorted[i]);
    if (k > low && CloseRange(low, k - 1) != 0) ranged = false;
    low = k + 1;
  }
  if (ranged && CloseRange(low, ~0u) == 0) return;
  // No close_range: whatever is still open above 2 goes now.
  if (!internal::CloseByListing(3, sorted, n)) internal::CloseByNumber(3, sorted, n);
}

}  // namespace retention
}  // namespace fathom
