// The pprof schema: field numbers of perftools.profiles.Profile and its
// messages (pprof's proto/profile.proto), the one place they are written
// down. PprofBuilder (encode/pprof_builder.cc) encodes whole profiles with
// them; the retention encoder (retention/retention_profile.cc) streams its
// samples after a builder's output with the same numbers and ProtoWriter.
#pragma once

#include <cstdint>

namespace fathom {
namespace pprof_schema {

namespace profile {
enum : uint32_t {
  kSampleType = 1, kSample = 2, kMapping = 3, kLocation = 4, kFunction = 5, kStringTable = 6,
  kTimeNanos = 9, kDurationNanos = 10, kPeriodType = 11, kPeriod = 12, kComment = 13,
  kDefaultSampleType = 14,
};
}  // namespace profile
namespace value_type { enum : uint32_t { kType = 1, kUnit = 2 }; }
namespace sample { enum : uint32_t { kLocationId = 1, kValue = 2, kLabel = 3 }; }
namespace label { enum : uint32_t { kKey = 1, kStr = 2, kNum = 3, kNumUnit = 4 }; }
namespace mapping {
enum : uint32_t { kId = 1, kFilename = 5, kHasFunctions = 7, kHasFilenames = 8, kHasLineNumbers = 9 };
}
namespace location { enum : uint32_t { kId = 1, kMappingId = 2, kLine = 4 }; }
namespace line { enum : uint32_t { kFunctionId = 1, kLine = 2 }; }
namespace function {
enum : uint32_t { kId = 1, kName = 2, kSystemName = 3, kFilename = 4, kStartLine = 5 };
}

}  // namespace pprof_schema
}  // namespace fathom
