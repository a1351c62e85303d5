// Which live objects explain the heap profile's top allocation sites
// (Fathom::Retention.explain_sites): the sites with the most live objects,
// and the first few objects of each, for a retention snapshot to follow.
//
// Pure: the caller (ruby/heap/live_objects.cc) lists the live objects in
// store order by site id and names the sites; nothing here touches an
// object. It replaced a pick written in Ruby (group_by, sort_by, map),
// whose intermediate Arrays held every live object with its site and could
// be left on the C stack, which the snapshot scans conservatively: on Ruby
// 3.4 they showed up as "(root: machine_context) → in machine_context
// (Array) → [0] → [1] → [10+] (Array)", 1,362 arrays charged to the
// program (docs/internals/retention.md, "Why the top sites are alive").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

struct LiveSitePick {
  uint32_t site = 0;              // the caller's site id
  uint32_t live = 0;              // live objects of the site
  std::vector<uint32_t> picked;   // positions in the input, its first `per_site` objects in input order
};

// site_of[i]: the site id (< names.size()) of the i-th live object.
// Returns up to `top` sites, most live objects first, ties by name
// (bytewise ascending), the order the Ruby pick gave. std::out_of_range
// for a site id without a name.
std::vector<LiveSitePick> PickLiveSites(const std::vector<uint32_t>& site_of, const std::vector<std::string>& names,
                                        size_t top, size_t per_site);

}  // namespace fathom
