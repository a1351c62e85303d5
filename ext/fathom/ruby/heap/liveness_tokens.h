// Liveness tokens for sampled heap records: is the object a record was
// taken for still alive at flush time? Sampled mode has no FREEOBJ hook (it
// alone costs ~+32% on an allocation loop), so a record keeps a token taken
// at commit, and the flush asks whether the token still leads to an object.
//
// Two implementations, chosen by the Ruby layer per Ruby version
// (Fathom::HeapProfiler passes `liveness:`; tests force each one):
//
//   kObjectId  token = rb_obj_id(obj); alive ⇔ ObjectSpace._id2ref(token)
//              finds it. Ruby drops an id when its object is freed and never
//              reuses ids, so a reused slot is not mistaken for ours, and ids
//              survive GC.compact. Used on Ruby < 3.2.3: there object_id has
//              no side effect on the object, and ObjectSpace::WeakMap is
//              broken under compaction (3.1.0–3.1.3, 3.2.0–3.2.2, Ruby bug
//              #19529). Refused on Ruby 4.0+ (_id2ref deprecated there, and
//              wrong for some dead ids: Bug #22200; liveness_tokens.cc).
//   kWeakMap   token = a sequence number; an ObjectSpace::WeakMap maps it to
//              the object, weakly. alive ⇔ the map still has the key. Used on
//              Ruby ≥ 3.2.3: there object_id moves an object to a new shape
//              (a lasting change to the user's object), and _id2ref is
//              deprecated in 3.5/4.0. WeakMap#[]= allocates, which is why
//              tokens are taken at commit (a postponed job), never in the
//              allocation hook.
//
// All calls need the GVL and happen outside GC. Track and Lookup call Ruby
// (a method call may switch threads): callers hold no reference into
// containers other threads' hooks may grow.
#pragma once

#include <ruby.h>

#include <cstdint>

namespace fathom {

enum class TokenKind { kObjectId, kWeakMap };

class LivenessTokens {
 public:
  static constexpr uint64_t kUntracked = 0;

  // Parses "object_id" / "weakmap" (raises ArgumentError through the
  // boundary otherwise).
  static TokenKind ParseKind(VALUE name);
  static const char* KindName(TokenKind kind);

  explicit LivenessTokens(TokenKind kind) : kind_(kind) {}
  TokenKind kind() const { return kind_; }

  // A token for a committed sample's object, or kUntracked when the object
  // cannot be tracked (internal objects have no id).
  uint64_t Track(VALUE obj);
  // The object behind a token if it is still alive, else Qundef.
  VALUE Lookup(uint64_t token);
  // kObjectId only: `candidate` if it is the object the token was taken
  // for, else Qundef. The caller saw `candidate` in a heap slot with no GC
  // since (a live, non-internal object: the flush's census). It is ours iff
  // it has an object id (RUBY_FL_SEEN_OBJ_ID, a public flag) and that id is
  // the token: ids are never reused. Unlike Lookup it raises nothing (a
  // dead lookup's RangeError is an exception, a message and a backtrace,
  // ~3 us) and gives no id to an object that had none.
  VALUE LookupAt(uint64_t token, VALUE candidate);
  // Every record was dropped (stop, fork): start over. (A single dead
  // record needs nothing: its WeakMap entry went with its object.)
  void Reset();

  // GC glue: the WeakMap is ours to keep alive (and to follow if it moves).
  void Mark() const;
  void UpdateAfterCompaction();

 private:
  TokenKind kind_;
  VALUE weak_map_ = Qnil;  // kWeakMap, created on first Track
  uint64_t next_token_ = 1;
};

}  // namespace fathom
