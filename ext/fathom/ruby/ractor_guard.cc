#include "ractor_guard.h"

#include <ruby.h>

#include <atomic>

namespace fathom {
namespace {
std::atomic<bool> g_other_ractor_seen{false};
}  // namespace

void NoteOtherRactor() { g_other_ractor_seen.store(true, std::memory_order_relaxed); }

bool OtherRactorSeen() { return g_other_ractor_seen.load(std::memory_order_relaxed); }

}  // namespace fathom
