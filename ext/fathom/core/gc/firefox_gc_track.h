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

namespace firefox {
class Profile;
class Thread;
}  // namespace firefox

// The same track added to an existing profile (the combined cpu+gc+heap
// file), times shifted by offset_ms (this data's start after the profile's).
// Adds the GC and Idle categories and the GC schema.
// beside_thread_tracks: the file has CPU/wall tracks, which hold the same
// GC time; the schema's description then says so.
firefox::Thread& AddGcTrack(firefox::Profile& profile, const GcProfileData& data, double offset_ms,
                            bool beside_thread_tracks = false);

}  // namespace fathom
