// The GC timeline in the Firefox Profiler's processed format: a "Garbage
// Collection" track with one interval marker per GC period and weighted
// samples on a "Garbage Collection" frame (see firefox_profile.h for the
// format itself).
#pragma once

#include <string>

#include "gc/gc_profile.h"

namespace fathom {

// The whole profile as JSON text, gzipped when gzip is true.
std::string EncodeGcFirefox(const GcProfileData& data, bool gzip);

}  // namespace fathom
