#include "ruby/io/firefox_parts.h"
#include "ruby/init.h"

#include <string>

#include "ruby/native_class.h"
#include "ruby/runtime/boundary.h"
#include "timeline/firefox_combined.h"

namespace fathom {
namespace {

void PartsFree(void* ptr) { delete static_cast<FirefoxParts*>(ptr); }

size_t PartsSize(const void* ptr) {
  const auto* p = static_cast<const FirefoxParts*>(ptr);
  size_t n = sizeof *p;
  if (p->cpu) n += p->cpu->timeline.size() * sizeof(CpuTimelineSample) + p->cpu->symbols.size() * 64;
  if (p->gc) n += p->gc->periods.size() * sizeof(GcPeriod);
  if (p->heap) n += p->heap->allocations.size() * sizeof(HeapProfileRows::Allocation) + p->heap->symbols.size() * 64;
  return n;
}

const rb_data_type_t kPartsType = DataType("Fathom::Native::FirefoxParts", nullptr, PartsFree, PartsSize);

struct EncodeJob {
  FirefoxParts* parts;
  bool gzip;
  std::string out;
  VALUE result = Qnil;
};

void EncodeOffGvl(EncodeJob* job) {
  WithoutGvl([job] {
    job->out = EncodeCombinedFirefox(job->parts->cpu.get(), job->parts->gc.get(), job->parts->heap.get(), job->gzip);
  });
  job->result = rb_str_new(job->out.data(), static_cast<long>(job->out.size()));
}

// encode(gzip) -> String: one Firefox Profiler file of every part taken.
// The parts are kept (encode again gives the same bytes).
VALUE PartsEncode(VALUE self, VALUE gzip) {
  FirefoxParts* parts = UnwrapFirefoxParts(self);
  return RubyMethod([&] {
    if (!parts->cpu && !parts->gc && !parts->heap) ThrowFathomError("fathom: no profile was taken into these parts");
    auto job = std::make_unique<EncodeJob>();
    job->parts = parts;
    job->gzip = RTEST(gzip);
    EncodeJob* j = job.get();
    Protect([j] { EncodeOffGvl(j); });
    return j->result;
  });
}

// [:cpu, :gc, :heap] for the parts present.
VALUE PartsKinds(VALUE self) {
  FirefoxParts* parts = UnwrapFirefoxParts(self);
  VALUE out = rb_ary_new();
  if (parts->cpu) rb_ary_push(out, ID2SYM(rb_intern("cpu")));
  if (parts->gc) rb_ary_push(out, ID2SYM(rb_intern("gc")));
  if (parts->heap) rb_ary_push(out, ID2SYM(rb_intern("heap")));
  return out;
}

}  // namespace

FirefoxParts* UnwrapFirefoxParts(VALUE parts) { return Unwrap<FirefoxParts>(parts, kPartsType); }

void InitFirefoxParts(VALUE mNative) {
  VALUE klass = rb_define_class_under(mNative, "FirefoxParts", rb_cObject);
  rb_define_alloc_func(klass, Allocate<FirefoxParts, &kPartsType>);
  DefineMethods(klass, {{"encode", Method(PartsEncode)}, {"kinds", Method(PartsKinds)}});
}

}  // namespace fathom
