// The heap collector's live objects, for the retention snapshot that
// explains why the top allocation sites are still alive
// (Fathom::Retention.explain_sites, docs/internals/retention.md, "Why the
// top sites are alive"): live_objects lists them with their sites;
// live_sites picks the few a snapshot follows without making a Ruby
// object per live object.
#include <ruby.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heap/live_sites.h"
#include "ruby/heap/heap_collector.h"
#include "ruby/runtime/boundary.h"
#include "ruby/heap/gc_pause.h"
#include "ruby/runtime/ruby_private_api.h"
#include "ruby/runtime/symbols.h"

namespace fathom {
namespace {

// The allocation site of a stack: "String#* ← Foo#bar foo.rb:12" (the leaf
// frame, then the first Ruby frame with its line).
std::string SiteOf(HeapCollector* c, uint32_t stack_id) {
  StackTable& stacks = c->store.stacks();
  // Copies: symbolizing calls Ruby, and other threads' hooks may then grow
  // the stack table under any reference into it.
  const std::vector<uint32_t> frames = stacks.frames(stack_id);
  const std::vector<int32_t> lines = stacks.lines(stack_id);
  if (frames.empty()) return "(no stack)";
  auto symbol = [&](uint32_t frame) -> FrameSymbol {
    if (!stacks.symbol(frame).resolved)
      stacks.SetSymbol(frame, SymbolizeFrame(static_cast<VALUE>(stacks.frame_handle(frame))));
    return stacks.symbol(frame);
  };
  std::string site = symbol(frames[0]).name;
  for (size_t k = 0; k < frames.size(); k++) {
    FrameSymbol sym = symbol(frames[k]);
    if (sym.filename.empty() || sym.filename[0] == '<') continue;  // C frames: "<cfunc>"
    if (k > 0) site += " \u2190 " + sym.name;
    site += " " + sym.filename + ":" + std::to_string(lines[k]);
    break;
  }
  return site;
}

// Whether Ruby code may hold `obj`. The exact profiler records every
// allocation, Ruby's own internal objects among them: a method cache (an
// imemo whose class slot says String), an iclass, a hidden buffer (no
// class). Handed to Ruby, `String === cache` was true and `cache.bytesize`
// crashed; so was marking an array that held one after Ruby freed it.
bool VisibleToRuby(VALUE obj) {
  switch (RB_BUILTIN_TYPE(obj)) {
    case RUBY_T_NONE:
    case RUBY_T_NODE:  // rb_objspace_internal_object_p calls rb_bug on one (3.1)
    case RUBY_T_IMEMO:
    case RUBY_T_ICLASS:
    case RUBY_T_ZOMBIE:
    case RUBY_T_MOVED:
      return false;
    default:
      break;
  }
  if (RBASIC_CLASS(obj) == 0) return false;
#ifdef FATHOM_HAVE_SLOT_WALK
  return !rb_objspace_internal_object_p(obj);  // also internal singleton classes
#else
  return true;
#endif
}

// live_objects(limit) -> [[site, object], ...]: up to `limit` objects of
// live records, each with its allocation site. For the heap+retention
// combination: the retention snapshot explains why these are alive. Exact
// mode: records FREEOBJ has not retired, with the GC held off from before
// they are read until they are in the array (ruby/heap/gc_pause.h); run
// a GC first so that garbage not yet collected is not among them. Sampled
// mode: tokens that still resolve. Holding the returned objects keeps them
// alive.
VALUE CollectorLiveObjects(VALUE self, VALUE limit_value) {
  HeapCollector* c = UnwrapHeapCollector(self);
  long limit = NUM2LONG(limit_value);
  return RubyMethod([&] {
    VALUE out = rb_ary_new();
    if (c->liveness_lost || c->flushing) return out;
    GcPause pause(c->exact);
    std::vector<std::pair<uint32_t, uint64_t>> picked;  // (stack, object or liveness token)
    for (uint32_t i = 0; i < c->store.capacity() && static_cast<long>(picked.size()) < limit; i++) {
      if (!c->store.is_live(i) || (c->exact && !c->store.object_known(i))) continue;
      const SampleRecord& r = c->store.at(i);
      if (c->exact && !VisibleToRuby(static_cast<VALUE>(r.object))) continue;
      picked.emplace_back(r.stack_id, c->exact ? r.object : r.liveness_token);
    }
    // Ruby calls from here on (symbolizing, token lookups): nothing above is used by reference.
    for (auto& p : picked) {
      VALUE obj = c->exact ? static_cast<VALUE>(p.second) : c->tokens.Lookup(p.second);
      if (obj == Qundef) continue;
      std::string site = SiteOf(c, p.first);
      Protect([&] { rb_ary_push(out, rb_assoc_new(rb_utf8_str_new(site.data(), static_cast<long>(site.size())), obj)); });
    }
    return out;
  });
}

// A live record as live_sites copies it before any Ruby call: a GC (or
// another thread's hook) may change the store while sites are named.
struct LiveRecord {
  uint32_t index;
  uint32_t stack_id;
  uint64_t handle;  // exact: the object; sampled: its liveness token
};

// The object behind a copied record, if it is still alive: exact mode
// asks the store (FREEOBJ retires a freed object's record; under GcPause
// none is freed), sampled mode the token.
VALUE LiveObject(HeapCollector* c, const LiveRecord& r) {
  if (!c->exact) return c->tokens.Lookup(r.handle);
  if (!c->store.is_live(r.index) || c->store.at(r.index).object != r.handle) return Qundef;
  return static_cast<VALUE>(r.handle);
}

// live_sites' work.
VALUE PickLiveSitesInto(HeapCollector* c, size_t top, size_t per_site, size_t limit,
                                                  VALUE focus) {
  std::vector<LiveRecord> records;
  for (uint32_t i = 0; i < c->store.capacity() && records.size() < limit; i++) {
    if (!c->store.is_live(i) || (c->exact && !c->store.object_known(i))) continue;
    const SampleRecord& r = c->store.at(i);
    if (c->exact && !VisibleToRuby(static_cast<VALUE>(r.object))) continue;
    records.push_back({i, r.stack_id, c->exact ? r.object : r.liveness_token});
  }
  // Ruby calls from here on (token lookups, symbolizing): nothing above is
  // used by reference. Sampled records whose object is gone are not live
  // (as live_objects counts them).
  std::vector<LiveRecord> live;
  for (const LiveRecord& r : records)
    if (c->exact || c->tokens.Lookup(r.handle) != Qundef) live.push_back(r);
  std::vector<std::string> names;
  std::unordered_map<std::string, uint32_t> site_ids;
  std::unordered_map<uint32_t, uint32_t> site_of_stack;
  std::vector<uint32_t> site_of;
  site_of.reserve(live.size());
  for (const LiveRecord& r : live) {
    auto known = site_of_stack.find(r.stack_id);
    if (known == site_of_stack.end()) {
      std::string site = SiteOf(c, r.stack_id);
      auto id = site_ids.emplace(site, static_cast<uint32_t>(names.size()));
      if (id.second) names.push_back(site);
      known = site_of_stack.emplace(r.stack_id, id.first->second).first;
    }
    site_of.push_back(known->second);
  }
  VALUE sites = Qnil;
  Protect([&] { sites = rb_ary_new(); });
  for (const LiveSitePick& pick : PickLiveSites(site_of, names, top, per_site)) {
    long picked = 0;
    for (uint32_t position : pick.picked) {
      VALUE obj = LiveObject(c, live[position]);
      if (obj == Qundef) continue;  // a sampled object freed while sites were named
      Protect([&] { rb_ary_push(focus, obj); });
      picked++;
    }
    const std::string& name = names[pick.site];
    Protect([&] {
      rb_ary_push(sites, rb_ary_new_from_args(3, rb_utf8_str_new(name.data(), static_cast<long>(name.size())),
                                              ULONG2NUM(pick.live), LONG2NUM(picked)));
    });
  }
  return sites;
}

// live_sites(top, per_site, limit, focus) -> [[site, live, picked], ...]:
// the `top` allocation sites with the most live objects among the first
// `limit` live records (most first, ties by site), each with its first
// `per_site` objects pushed onto `focus` (an Array; `picked` of them, fewer
// when one was freed meanwhile), in that order. Liveness as live_objects
// has it, the GC held off in exact mode: run a GC first. No Ruby object is made per live
// object: the snapshot that follows finds the objects in `focus` only
// (Retention.explain_sites runs it in Native.with_stack_scrubbed, which
// zeroes the stack slots it passed them through).
VALUE CollectorLiveSites(VALUE self, VALUE top, VALUE per_site, VALUE limit, VALUE focus) {
  HeapCollector* c = UnwrapHeapCollector(self);
  // Conversions raise (a longjmp): before any C++ object is alive.
  size_t top_n = NUM2SIZET(top), per_site_n = NUM2SIZET(per_site), limit_n = NUM2SIZET(limit);
  return RubyMethod([&] {
    if (!RB_TYPE_P(focus, T_ARRAY)) ThrowTypeError("fathom: focus must be an Array");
    if (c->liveness_lost || c->flushing) return rb_ary_new();
    GcPause pause(c->exact);
    return PickLiveSitesInto(c, top_n, per_site_n, limit_n, focus);
  });
}

}  // namespace

void DefineLiveObjectMethods(VALUE klass) {
  rb_define_method(klass, "live_objects", RUBY_METHOD_FUNC(CollectorLiveObjects), 1);
  rb_define_method(klass, "live_sites", RUBY_METHOD_FUNC(CollectorLiveSites), 4);
}

}  // namespace fathom
