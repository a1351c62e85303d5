// See forked_child.h.
#include "ruby/fork/forked_child.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "base/clock.h"
#include "io/child_isolation.h"
#include "ruby/runtime/boundary.h"

namespace fathom {

bool ForkAndCollect(const char* fault_site, int64_t timeout_ns, const std::vector<int>& keep_fds,
                    const std::function<void(int write_fd)>& child_main, const std::function<void()>& after_fork,
                    ForkedChild* out, int* fork_errno) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *fork_errno = errno;
    return false;
  }
  // What the child keeps, made here: the child allocates nothing for it.
  std::vector<int> keep(keep_fds);
  keep.push_back(fds[1]);
  pid_t parent = getpid();
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved);
  int64_t t0 = MonotonicNs();
  pid_t pid = fork();
  if (pid == 0) {
    // First of all (core/io/child_isolation.h): a child whose parent was
    // SIGKILLed must not run on with nobody to enforce its deadline, and
    // must hold none of the app's sockets, files or locks meanwhile.
    if (!retention::DieWithParent(parent)) _exit(4);
    retention::CloseInheritedDescriptors(keep.data(), keep.size());
    child_main(fds[1]);
    _exit(3);  // child_main must not return; if it does, still no at_exit
  }
  out->fork_ns = MonotonicNs() - t0;
  int saved_errno = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  after_fork();
  close(fds[1]);
  if (pid < 0) {
    *fork_errno = saved_errno;
    close(fds[0]);
    return false;
  }
  std::atomic<bool> cancel{false};
  bool collected = false;
  try {
    FATHOM_FAULT_POINT(fault_site);
    (void)fault_site;  // a plain build compiles no fault points
    Protect([&] {
      for (;;) {
        cancel = false;
        WithoutGvlCancellable(&cancel, [&] {
          retention::CollectChild(pid, fds[0], t0, timeout_ns, &cancel, &out->report);
          // Reaped and closed unless cancelled: an interrupt raising on the
          // way out must not kill or close them again (a reused pid or fd).
          collected = out->report.outcome != retention::ChildReport::kCancelled;
        });
        if (collected) break;
        rb_thread_check_ints();
      }
    });
  } catch (...) {
    if (!collected) retention::KillAndReap(pid, fds[0]);
    throw;
  }
  return true;
}

}  // namespace fathom
