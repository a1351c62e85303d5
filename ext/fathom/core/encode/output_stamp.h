// OutputStamp: what a profile that leaves the process says about where it
// came from, written by the encoder itself so that no layer above has to
// reopen the gzipped bytes to add it (always-on files shipped to Pyroscope
// or Parca, profiles fetched over HTTP).
//
//   pid=4242
//   hostname=web-1
//   ruby=3.1.2 (x86_64-linux-gnu)
//   window=2026-11-26T15:00:00.000Z/2026-11-26T15:00:02.000Z
//
// The first lines are the caller's (`comments`: they describe the process,
// which only the Ruby side knows); the window is the profile's own
// time_nanos + duration_nanos as an ISO 8601 interval in UTC, to the
// millisecond, so it always agrees with the profile's time fields.
// `go tool pprof -comments` lists them after the profile's own comments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

class PprofBuilder;

struct OutputStamp {
  std::vector<std::string> comments;  // added in order, after the profile's own
  bool window = false;                // add "window=<start>/<end>" (skipped when time is unset)
  std::string default_sample_type;    // "" keeps the encoder's default
};

// "2026-11-26T15:00:00.000Z" for nanoseconds since the Unix epoch (UTC).
std::string IsoUtcMillis(int64_t unix_nanos);

// Adds the stamp to a profile being built: after its own comments and after
// set_time (the window reads the builder's time). A default sample type the
// profile does not have throws std::invalid_argument (PprofBuilder's rule).
void ApplyOutputStamp(const OutputStamp& stamp, PprofBuilder& builder);

}  // namespace fathom
