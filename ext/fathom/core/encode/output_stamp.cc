#include "encode/output_stamp.h"

#include <time.h>

#include <cstdio>

#include "encode/pprof_builder.h"

namespace fathom {

std::string IsoUtcMillis(int64_t unix_nanos) {
  // Floor division, so a time before 1970 still gives a valid date.
  int64_t seconds = unix_nanos / 1000000000;
  int64_t nanos = unix_nanos % 1000000000;
  if (nanos < 0) {
    nanos += 1000000000;
    seconds -= 1;
  }
  time_t t = static_cast<time_t>(seconds);
  struct tm utc;
  if (gmtime_r(&t, &utc) == nullptr) return "invalid";
  char out[48];
  snprintf(out, sizeof(out), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
           utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(nanos / 1000000));
  return out;
}

void ApplyOutputStamp(const OutputStamp& stamp, PprofBuilder& builder) {
  if (!stamp.default_sample_type.empty()) builder.set_default_sample_type(stamp.default_sample_type);
  for (const std::string& c : stamp.comments) builder.add_comment(c);
  // An unset time (0) has no window to give: Ruby's side wrote none either.
  if (stamp.window && builder.time_nanos() > 0) {
    builder.add_comment("window=" + IsoUtcMillis(builder.time_nanos()) + "/" +
                        IsoUtcMillis(builder.time_nanos() + builder.duration_nanos()));
  }
}

}  // namespace fathom
