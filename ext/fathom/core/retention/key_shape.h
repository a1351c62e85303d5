// What a profile may say about a piece of the program's data (a String hash
// key) without saying what it is: its length and a 16-bit hash of its bytes.
//
// Profiles leave the machine (always-on directories, /debug/fathom/*), and a
// hash key is data: API_CLIENTS = {"sk_live_…" => client} once put the API
// key itself into a retention frame. So by default a String key is shown by
// its shape, `{"…" 32 bytes #a1b2}`: the same key gives the same name in
// every snapshot of every process (the hash is unkeyed: FNV-1a, so
// `fathom diff` matches chains across restarts too), two keys of one hash
// are told apart unless both length and hash collide, and the key is not in
// the file. 16 bits is on purpose too few to confirm a guess: one in 65,536
// wrong guesses of the right length matches. A secret that is itself that
// guessable (a 4-digit PIN, a word from a short list) could still be picked
// out from a few candidates; an API key or a password of any strength
// cannot. (docs/internals/retention.md, "Retention: why objects are still alive".)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fathom {
namespace retention {

// FNV-1a (32-bit) of the bytes, xor-folded to 16 bits. Stable: a change
// here changes every shaped name, so `fathom diff` across versions would
// see every keyed frame as new (KeyShapeTest pins values).
uint16_t KeyHash16(std::string_view bytes);

// `"…" 32 bytes #a1b2` (quote = '"' for a String key, ":" for a Symbol's:
// `:… 7 bytes #0c3e`). No parentheses: a frame's trailing "(Class)" is
// what `fathom diff` strips.
std::string KeyShape(std::string_view bytes, bool symbol = false);

}  // namespace retention
}  // namespace fathom
