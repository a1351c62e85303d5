// flush(format, gzip, stamp) of the collectors that encode their own
// window (GC, CPU): one argument check, one stamp, one encode without the
// GVL, instead of a copy of each in gc_collector.cc and cpu_collector.cc.
// (The heap collector's flush walks the heap with the GVL held and yields
// between batches: heap/heap_flush.cc, a different shape.)
#pragma once

#include <ruby.h>

#include <memory>
#include <string>
#include <utility>

#include "ruby/io/output_stamp_arg.h"
#include "ruby/runtime/boundary.h"

namespace fathom {

// true for :firefox, false for :pprof; ArgumentError naming the value
// otherwise. Throws (call inside RubyMethod).
bool FirefoxFormatArg(VALUE format);

// Checks the arguments before anything is taken (a bad one loses no
// window), takes the window with take() while holding the GVL, stamps it
// (who wrote it: pprof only), then encodes it with encode_pprof(data) or
// encode_firefox(data, gzip) without the GVL, and returns the bytes as a
// String. The window lives on the heap, not in a frame that a Ruby jump
// could skip: leaving the blocking region runs interrupts (a
// Thread#raise), which Protect turns into a C++ exception, so the
// unique_ptr frees it. fault_site: the test build's FATHOM_FAULT_POINT.
template <typename Take, typename EncodePprof, typename EncodeFirefox>
VALUE FlushWindow(VALUE format, VALUE gzip, VALUE stamp, const char* fault_site, Take take,
                  EncodePprof encode_pprof, EncodeFirefox encode_firefox) {
  bool firefox = FirefoxFormatArg(format);
  bool zip = RTEST(gzip);
  OutputStamp who = OutputStampArg(stamp);
  struct Job {
    decltype(take()) data;
    std::string out;
    VALUE result = Qnil;
  };
  auto job = std::make_unique<Job>();
  job->data = take();
  job->data.stamp = std::move(who);
  Job* j = job.get();
  Protect([&] {
    WithoutGvl([&] {
      FATHOM_FAULT_POINT(fault_site);
      j->out = firefox ? encode_firefox(j->data, zip) : encode_pprof(j->data);
    });
    j->result = rb_str_new(j->out.data(), static_cast<long>(j->out.size()));
  });
  return j->result;
}

}  // namespace fathom
