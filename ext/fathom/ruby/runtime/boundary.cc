// See boundary.h: the only file that calls rb_raise, rb_protect,
// rb_jump_tag and rb_thread_call_without_gvl.
#include "ruby/runtime/boundary.h"

#include <ruby/thread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace fathom {

VALUE eFathomError = Qnil;

namespace {
std::atomic<uint64_t> g_internal_errors{0};
std::atomic<const char*> g_last_error_site{nullptr};

void FormatInto(char* buf, size_t size, const char* fmt, va_list ap) {
  vsnprintf(buf, size, fmt, ap);
}
}  // namespace

RubyError::RubyError(VALUE klass, const char* fmt, ...) : klass_(klass) {
  va_list ap;
  va_start(ap, fmt);
  FormatInto(message_, sizeof(message_), fmt, ap);
  va_end(ap);
}

void RecordInternalError(const char* where) noexcept {
  g_internal_errors.fetch_add(1, std::memory_order_relaxed);
  g_last_error_site.store(where, std::memory_order_relaxed);
}
uint64_t InternalErrorCount() noexcept { return g_internal_errors.load(std::memory_order_relaxed); }
const char* LastInternalErrorSite() noexcept { return g_last_error_site.load(std::memory_order_relaxed); }

// ------------------------------------------------------------ fault injection

#ifdef FATHOM_FAULT_INJECTION
namespace {
char g_fault_site[128];
bool g_fault_length_error = false;
}  // namespace

void InitFaultInjection() {
  const char* spec = getenv("FATHOM_INJECT_FAULT");
  if (spec == nullptr) return;
  snprintf(g_fault_site, sizeof(g_fault_site), "%s", spec);
  char* colon = strchr(g_fault_site, ':');
  if (colon != nullptr) {
    g_fault_length_error = strcmp(colon + 1, "length_error") == 0;
    *colon = '\0';
  }
}

void MaybeInjectFault(const char* site) {
  if (g_fault_site[0] == '\0' || strcmp(site, g_fault_site) != 0) return;
  if (g_fault_length_error) throw std::length_error("fathom: injected length_error");
  throw std::bad_alloc();
}
bool FaultInjectionBuilt() { return true; }
#else
void InitFaultInjection() {}
bool FaultInjectionBuilt() { return false; }
#endif

// ------------------------------------------------------------ doors

namespace detail {

void CallWithoutGvl(void* (*fn)(void*), void* arg) {
  // No unblocking function: the work is bounded (encode, compress, analyze)
  // and must finish to leave the profiler consistent.
  rb_thread_call_without_gvl(fn, arg, nullptr, nullptr);
}

}  // namespace detail

namespace {
void SetCancel(void* cancel) { static_cast<std::atomic<bool>*>(cancel)->store(true); }
}  // namespace

void CallWithoutGvlCancellable(void* (*fn)(void*), void* arg, std::atomic<bool>* cancel) {
  rb_thread_call_without_gvl(fn, arg, SetCancel, cancel);
}

namespace detail {

int CallProtect(VALUE (*fn)(VALUE), VALUE arg) {
  int state = 0;
  rb_protect(fn, arg, &state);
#if defined(__SANITIZE_ADDRESS__)
  // A Ruby exception longjmps here from inside libruby, which ASan does not
  // instrument, so the redzones of our instrumented frames it skipped stay
  // poisoned below the stack pointer, and a later call that reuses that
  // stack is reported as a stack-buffer-overflow. Clear them, as ASan does
  // itself before an instrumented noreturn call.
  if (state) __asan_handle_no_return();
#endif
  return state;
}

bool ClearIfStandardError() {
  // After exit or Thread#kill, errinfo is not a StandardError (SystemExit,
  // or an internal marker that is not an exception at all).
  // After `throw` it is an internal THROW_DATA whose class slot is not a
  // class: only a real exception object may be asked for its class.
  VALUE err = rb_errinfo();
  if (!RB_TYPE_P(err, T_OBJECT) || !RTEST(rb_obj_is_kind_of(err, rb_eStandardError))) return false;
  rb_set_errinfo(Qnil);
  return true;
}

void CaptureCurrentException(Outcome* out) noexcept {
  out->message[0] = '\0';
  try {
    throw;
  } catch (const RubyJump& j) {
    out->jump = j.state;
  } catch (const RubyError& e) {
    out->error_class = e.klass();
    snprintf(out->message, sizeof(out->message), "%s", e.what());
  } catch (const std::bad_alloc&) {
    out->error_class = rb_eNoMemError;
    snprintf(out->message, sizeof(out->message), "fathom: out of memory");
  } catch (const std::exception& e) {
    out->error_class = eFathomError;
    snprintf(out->message, sizeof(out->message), "fathom: internal error: %s", e.what());
  } catch (...) {
    out->error_class = eFathomError;
    snprintf(out->message, sizeof(out->message), "fathom: internal error");
  }
}

void Resume(const Outcome& out) {
  if (out.jump != 0) rb_jump_tag(out.jump);
  rb_raise(out.error_class, "%s", out.message);
}

}  // namespace detail

#define FATHOM_THROW_FORMATTED(klass)      \
  char buf[512];                           \
  va_list ap;                              \
  va_start(ap, fmt);                       \
  FormatInto(buf, sizeof(buf), fmt, ap);   \
  va_end(ap);                              \
  throw RubyError(klass, "%s", buf)

void ThrowArgumentError(const char* fmt, ...) { FATHOM_THROW_FORMATTED(rb_eArgError); }
void ThrowTypeError(const char* fmt, ...) { FATHOM_THROW_FORMATTED(rb_eTypeError); }
void ThrowFathomError(const char* fmt, ...) { FATHOM_THROW_FORMATTED(eFathomError); }

}  // namespace fathom
