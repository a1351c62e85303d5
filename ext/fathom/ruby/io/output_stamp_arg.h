// The `stamp` argument of every collector's flush: who wrote the profile
// (Fathom::ProcessComments.stamp), turned into the core's OutputStamp so
// the encoder writes it (core/encode/output_stamp.h) and nothing has to
// reopen the gzipped profile afterwards.
#pragma once

#include <ruby.h>

#include "encode/output_stamp.h"

namespace fathom {

// nil: no stamp. Else [lines, default_sample_type]: lines an Array of
// Strings (written as comments, then the window), default_sample_type a
// String or nil. TypeError for any other shape. Needs the GVL; throws
// (call inside RubyMethod).
OutputStamp OutputStampArg(VALUE stamp);

}  // namespace fathom
