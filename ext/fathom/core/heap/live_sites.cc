#include "heap/live_sites.h"

#include <algorithm>
#include <stdexcept>

namespace fathom {

std::vector<LiveSitePick> PickLiveSites(const std::vector<uint32_t>& site_of, const std::vector<std::string>& names,
                                        size_t top, size_t per_site) {
  std::vector<LiveSitePick> sites(names.size());
  for (uint32_t id = 0; id < sites.size(); id++) sites[id].site = id;
  for (uint32_t i = 0; i < site_of.size(); i++) {
    LiveSitePick& s = sites.at(site_of[i]);
    s.live++;
    if (s.picked.size() < per_site) s.picked.push_back(i);
  }
  sites.erase(std::remove_if(sites.begin(), sites.end(), [](const LiveSitePick& s) { return s.live == 0; }),
              sites.end());
  auto before = [&](const LiveSitePick& a, const LiveSitePick& b) {
    return a.live != b.live ? a.live > b.live : names[a.site] < names[b.site];
  };
  size_t keep = std::min(top, sites.size());
  std::partial_sort(sites.begin(), sites.begin() + static_cast<std::ptrdiff_t>(keep), sites.end(), before);
  sites.resize(keep);
  return sites;
}

}  // namespace fathom
