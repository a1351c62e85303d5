#include "io/new_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>


namespace fathom {

namespace {

constexpr const char* kLink = "link";

NewFileResult Failed(const char* step, int error) {
  NewFileResult r;
  r.status = NewFileResult::kFailed;
  r.error = error;
  r.step = step;
  return r;
}

// Closes a descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports close's own error (a write error NFS reports late).
  int Close() {
    int rc = close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// renameat2(RENAME_NOREPLACE) through syscall(2): glibc's wrapper is newer
// than some systems we build on. -1/ENOSYS or EINVAL where the kernel or
// the file system cannot (then nothing was renamed).
int RenameNoReplace(int dir_fd, const char* from, const char* to) {
#if defined(__linux__) && defined(SYS_renameat2)
  constexpr unsigned kRenameNoReplace = 1;  // RENAME_NOREPLACE
  return static_cast<int>(syscall(SYS_renameat2, dir_fd, from, dir_fd, to, kRenameNoReplace));
#else
  (void)dir_fd;
  (void)from;
  (void)to;
  errno = ENOSYS;
  return -1;
#endif
}

bool NoHardLinks(int error) {
  return error == EPERM || error == EOPNOTSUPP || error == EXDEV || error == EMLINK || error == ENOSYS;
}

int FsyncRetrying(int fd) {
  int rc;
  do rc = fsync(fd);
  while (rc != 0 && errno == EINTR);
  return rc;
}

}  // namespace

NewFileResult WriteNewFile(const std::string& dir, const std::string& name, const std::string& tmp_name,
                           const char* data, size_t size) {
  Fd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) return Failed("open directory", errno);

  // 0600: a profile holds memory contents (strings, paths); only its owner reads it.
  Fd file(openat(dir_fd.get(), tmp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (file.get() < 0) return Failed("open", errno);
  // The writer's lock, held until the temporary name is gone (see the
  // header): a duplicate of the descriptor is the same open file, so the
  // lock outlives file.Close() below and ends when this returns, after
  // the unlink. Never waits: the file is new and nobody else's.
  flock(file.get(), LOCK_EX | LOCK_NB);
  Fd lock(fcntl(file.get(), F_DUPFD_CLOEXEC, 0));

  NewFileResult result;
  const char* step = nullptr;  // the step that failed
  if (!WriteAll(file.get(), data, size)) {
    step = "write";
  } else if (FsyncRetrying(file.get()) != 0) {
    step = "fsync";
  } else if (file.Close() != 0) {
    step = "close";
  } else if (linkat(dir_fd.get(), tmp_name.c_str(), dir_fd.get(), name.c_str(), 0) != 0) {
    step = kLink;
    // No hard links here (a FAT or some FUSE file system): a rename that
    // does not replace either, where the kernel has one.
    if (NoHardLinks(errno) && RenameNoReplace(dir_fd.get(), tmp_name.c_str(), name.c_str()) == 0) {
      step = nullptr;
    } else if (errno == ENOSYS || errno == EINVAL) {
      errno = EPERM;  // the caller's fallback: no hard links, no safe rename
    }
  }
  int error = step ? errno : 0;
  unlinkat(dir_fd.get(), tmp_name.c_str(), 0);  // the data lives on under `name`, or is dropped

  if (step == nullptr) {
    FsyncRetrying(dir_fd.get());  // makes the new name durable; best effort
    result.status = NewFileResult::kWritten;
    return result;
  }
  if (step == kLink) {
    if (error == EEXIST) {
      result.status = NewFileResult::kExists;
      return result;
    }
    if (NoHardLinks(error)) {
      result.status = NewFileResult::kNoHardLinks;
      return result;
    }
  }
  return Failed(step, error);
}

}  // namespace fathom
