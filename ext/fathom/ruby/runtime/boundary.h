// The one place where C++ meets Ruby's C frames.
//
// Two kinds of non-local exit exist in this extension and neither may cross
// the other's frames:
//   - a C++ exception must never unwind through Ruby's C frames (a hook
//     Ruby calls, rb_protect, rb_thread_call_without_gvl, an st_foreach
//     callback): the unwinder finds no handler there and the process aborts;
//   - a Ruby exception (rb_raise, or anything that calls it: rb_funcall,
//     rb_thread_schedule running a Thread#raise) is a longjmp, which skips
//     C++ destructors: whatever C++ object is alive below it leaks, and a
//     lock it holds is never released.
//
// So every crossing goes through one of four doors, and nothing else in
// ext/fathom/ruby/ calls rb_raise, rb_protect or rb_thread_call_without_gvl
// (test/unit/boundary_rule_test.rb greps for it):
//
//   NoThrow(where, fallback, f)   for functions Ruby calls: event hooks, GC
//                                 mark/compact/free, foreach callbacks,
//                                 postponed jobs. Catches everything, counts
//                                 it (Fathom::Native.internal_errors), returns
//                                 `fallback`. Never raises, never allocates on
//                                 the error path (the site is a static string).
//   WithoutGvl(f)                 runs f with the GVL released. An exception
//                                 thrown in f is carried over Ruby's frames in
//                                 an exception_ptr and rethrown here, with the
//                                 GVL held again. Taking the GVL back runs
//                                 pending interrupts, which may raise (a
//                                 Thread#raise): call it inside Protect when
//                                 C++ objects are alive around it.
//   Protect(f)                    runs f (which may call Ruby and raise) under
//                                 rb_protect. A Ruby exception becomes a C++
//                                 RubyJump; a C++ exception thrown in f is
//                                 carried over rb_protect's frames and rethrown.
//                                 f's own locals must be trivially destructible
//                                 (a longjmp skips them); keep state in the
//                                 caller. TryProtect swallows StandardError only
//                                 (exit, Thread#kill and Interrupt still pass).
//   RubyMethod(f)                 the body of every method Ruby calls. f uses
//                                 C++ objects freely and reports errors by
//                                 throwing (RaiseArgumentError, RubyError, or
//                                 any std::exception). RubyMethod catches them,
//                                 lets f's frame die (all C++ objects gone),
//                                 and only then raises the Ruby exception or
//                                 re-throws the Ruby jump.
//
// FATHOM_FAULT_POINT("site") marks a place that a test build can make throw
// (FATHOM_INJECT_FAULT=site or site:length_error, read once at load), so
// test/crash/boundary_fault_test.rb checks that every door turns a C++
// failure into a Ruby exception or a counted, survived error, never an abort.
#pragma once

#include <ruby.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <utility>

namespace fathom {

// ------------------------------------------------------------ errors

// A Ruby exception to raise once the C++ frames are gone. The message is a
// fixed buffer: no heap, so carrying it cannot fail and nothing leaks when
// rb_raise longjmps.
class RubyError : public std::exception {
 public:
  RubyError(VALUE klass, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  VALUE klass() const { return klass_; }
  const char* what() const noexcept override { return message_; }

 private:
  VALUE klass_;
  char message_[512];
};

// A Ruby non-local exit (exception, throw, exit, kill) caught by Protect,
// to be resumed with rb_jump_tag once the C++ frames are gone.
struct RubyJump {
  int state;
};

// Fathom::Error (set by Init_fathom_ext before any class is defined).
extern VALUE eFathomError;

// Counts an exception swallowed at a callback Ruby called. `where` must be a
// string literal (kept, never copied). Async-signal-safe: two relaxed atomics.
void RecordInternalError(const char* where) noexcept;
uint64_t InternalErrorCount() noexcept;
const char* LastInternalErrorSite() noexcept;

// ------------------------------------------------------------ fault injection

#ifdef FATHOM_FAULT_INJECTION
// Throws std::bad_alloc (or std::length_error with ":length_error") when
// `site` is the one named by FATHOM_INJECT_FAULT.
void MaybeInjectFault(const char* site);
#define FATHOM_FAULT_POINT(site) ::fathom::MaybeInjectFault(site)
#else
#define FATHOM_FAULT_POINT(site) ((void)0)
#endif
// Reads FATHOM_INJECT_FAULT (no-op without FATHOM_FAULT_INJECTION).
void InitFaultInjection();
// Whether this build can inject faults (Fathom::Native.fault_injection?).
bool FaultInjectionBuilt();

// ------------------------------------------------------------ door 1: callbacks

template <typename R, typename F>
R NoThrow(const char* where, R fallback, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    RecordInternalError(where);
    return fallback;
  }
}

template <typename F>
void NoThrow(const char* where, F&& f) noexcept {
  try {
    f();
  } catch (...) {
    RecordInternalError(where);
  }
}

// ------------------------------------------------------------ door 2: no GVL

namespace detail {
template <typename F>
struct WithoutGvlCall {
  F* f;
  std::exception_ptr error;
  static void* Run(void* arg) {
    auto* self = static_cast<WithoutGvlCall*>(arg);
    try {
      (*self->f)();
    } catch (...) {
      self->error = std::current_exception();
    }
    return nullptr;
  }
};
void CallWithoutGvl(void* (*fn)(void*), void* arg);
}  // namespace detail

// f must not touch Ruby objects or call Ruby: the GVL is released.
template <typename F>
void WithoutGvl(F&& f) {
  detail::WithoutGvlCall<std::remove_reference_t<F>> call{&f, nullptr};
  detail::CallWithoutGvl(&decltype(call)::Run, &call);
  if (call.error) std::rethrow_exception(call.error);
}

// Like WithoutGvl, for a wait that must end when the thread is interrupted
// (Thread#kill, Interrupt, Timeout): Ruby's unblocking function sets
// *cancel, which f polls. f must return soon after.
void CallWithoutGvlCancellable(void* (*fn)(void*), void* arg, std::atomic<bool>* cancel);
template <typename F>
void WithoutGvlCancellable(std::atomic<bool>* cancel, F&& f) {
  detail::WithoutGvlCall<std::remove_reference_t<F>> call{&f, nullptr};
  CallWithoutGvlCancellable(&decltype(call)::Run, &call, cancel);
  if (call.error) std::rethrow_exception(call.error);
}

// ------------------------------------------------------------ door 3: protect

namespace detail {
template <typename F>
struct ProtectCall {
  F* f;
  std::exception_ptr error;
  static VALUE Run(VALUE arg) {
    auto* self = reinterpret_cast<ProtectCall*>(arg);
    try {
      (*self->f)();
    } catch (...) {
      self->error = std::current_exception();
    }
    return Qnil;
  }
};
int CallProtect(VALUE (*fn)(VALUE), VALUE arg);
// After a caught Ruby exception: clears it and returns true if it was a
// StandardError (safe to swallow); false for exit, kill, Interrupt, throw.
bool ClearIfStandardError();
}  // namespace detail

// Runs f under rb_protect; a Ruby exit becomes `throw RubyJump{state}`.
template <typename F>
void Protect(F&& f) {
  detail::ProtectCall<std::remove_reference_t<F>> call{&f, nullptr};
  int state = detail::CallProtect(&decltype(call)::Run, reinterpret_cast<VALUE>(&call));
  if (call.error) std::rethrow_exception(call.error);
  if (state) throw RubyJump{state};
}

// Like Protect, but a StandardError raised in f is swallowed (returns false):
// for optional Ruby calls whose failure only loses a name or a label. An
// exit, a Thread#kill or an Interrupt is not swallowed: it is thrown on.
template <typename F>
bool TryProtect(F&& f) {
  detail::ProtectCall<std::remove_reference_t<F>> call{&f, nullptr};
  int state = detail::CallProtect(&decltype(call)::Run, reinterpret_cast<VALUE>(&call));
  if (call.error) std::rethrow_exception(call.error);
  if (state == 0) return true;
  if (detail::ClearIfStandardError()) return false;
  throw RubyJump{state};
}

// ------------------------------------------------------------ door 4: methods

namespace detail {
// What a method body ended with, carried out of its frame. Plain data.
struct Outcome {
  VALUE result = Qnil;
  int jump = 0;            // resume this Ruby non-local exit
  VALUE error_class = 0;   // or raise this class with message
  char message[512];
};
void CaptureCurrentException(Outcome* out) noexcept;  // inside a catch (...)
[[noreturn]] void Resume(const Outcome& out);

template <typename F>
void RunBody(F& f, Outcome* out) noexcept {
  try {
    out->result = f();
  } catch (...) {
    CaptureCurrentException(out);
  }
}
}  // namespace detail

// The body of every Ruby-visible method: `return RubyMethod([&] { ...; return v; });`
// Must itself hold no C++ object with a destructor outside the lambda.
template <typename F>
VALUE RubyMethod(F&& f) {
  detail::Outcome out;
  detail::RunBody(f, &out);  // every C++ object of the body is gone after this
  if (out.jump != 0 || out.error_class != 0) detail::Resume(out);
  return out.result;
}

// Helpers for bodies: throw, do not raise.
[[noreturn]] void ThrowArgumentError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void ThrowTypeError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void ThrowFathomError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace fathom
