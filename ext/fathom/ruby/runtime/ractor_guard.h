// Fathom profiles the main Ractor only.
//
// Other Ractors run Ruby in parallel on their own threads, without the GVL
// the collectors rely on: a NEWOBJ hook firing on one of them would touch
// the sample store while the main Ractor does, which crashed exact mode
// and sampled mode at a 1 ms interval on 3.1. The Ruby layer
// (lib/fathom/process/ractor_check.rb) stops every profiler before Ractor.new and
// refuses to start while Ractors run; this guard is the native line behind
// it, for a Ractor created behind its back (through a Method object taken
// before Fathom was loaded): the NEWOBJ and GC-event hooks first ask
// OnMainRactor() and, on another Ractor, only note that they saw one and
// return. FREEOBJ does not ask: it runs in GC's sweep, which every Ractor
// waits for at Ruby's VM barrier, so nothing runs beside it, and the
// object it reports is dead whichever Ractor's thread swept it (skipping
// it would leave a dead object counted as live). stats[:ractors]
// then says "ignored". Defence in depth: event hooks are registered per
// Ractor since 3.0 (vm_trace.c connects a hook to the calling Ractor's
// list), so on 3.2+ another Ractor's allocations and GCs do not reach ours
// at all (test/crash/ractor_test.rb checks that nothing breaks), and on
// 3.1.0-3.1.3 Ruby crashes before our hook runs (bug #18464). No test has
// seen the guard say "no".
//
// How a hook tells, with Ruby's public API only (ruby/ractor.h, 3.0+): at
// load, on the main Ractor, Fathom stores a marker in a Ractor-local slot;
// rb_ractor_local_storage_ptr returns it on the main Ractor (a cached
// field) and NULL on any other (a lookup in the calling Ractor's own
// table): no allocation, no lock. The last thread found on the main Ractor
// is remembered, so a hook on that thread pays a compare (see
// ractor_guard.cc); a cheaper test would need
// libruby internals (3.1 exports rb_ractor_main_p_ and
// ruby_single_main_ractor, 3.3 hides both), and a flag set by the Ruby
// layer's Ractor.new wrapper would miss exactly the Ractors this guard is
// for.
#pragma once

#include <ruby.h>

namespace fathom {

// True when the calling thread belongs to the main Ractor (always, on a
// Ruby without Ractors). Safe in event hooks.
bool OnMainRactor();
// The same, for a hook that already has rb_thread_current().
bool OnMainRactor(VALUE current_thread);
// A hook fired on another Ractor. Lock-free, no allocation.
void NoteOtherRactor();
// Whether any hook has fired on another Ractor since the process started
// (Native.other_ractor_seen?).
bool OtherRactorSeen();

}  // namespace fathom
