#include "swa/paging.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace swa {

std::int64_t paged_pool_pages(const AttnParams& p) {
  const int P = p.page_size;
  std::int64_t total = 0;
  for (int b = 0; b < p.batch; ++b) {
    std::int64_t lo = 0, hi = -1, most = 0;  // the held logical pages, [lo, hi] (empty when hi < lo)
    for_each_cache_write(p, b, [&](std::int64_t s, std::int64_t e, std::int64_t next_reader) {
      const std::int64_t from = first_stored_row(p.band, s, next_reader, P);
      if (from < e) {
        const std::int64_t first = from / P, last = (e - 1) / P;
        if (hi >= lo && first <= hi + 1) {
          most = std::max(most, std::max(hi, last) - lo + 1);
          hi = std::max(hi, last);
        } else {
          // Nothing held, or a gap: a chunk longer than the window skips rows, and every page held
          // before it is dead after it.
          most = std::max(most, (hi >= lo ? hi - lo + 1 : 0) + last - first + 1);
          lo = first, hi = last;
        }
      }
      lo = std::max(lo, pages_dead_before(p.band, e, P));  // the frees after the call
    });
    total += most;
  }
  return total;
}

void validate_paging(const AttnParams& p) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw std::invalid_argument(message);
  };
  require(p.page_size >= 1 && p.page_size <= kMaxPageSize,
          "params.page_size must be 1.." + std::to_string(kMaxPageSize) + " for a paged cache, got " +
              std::to_string(p.page_size));
  const std::int64_t needed = paged_pool_pages(p);
  require(p.pool_pages >= needed, "params.pool_pages must be >= " + std::to_string(needed) +
                                      " (the pages the schedule holds at once), got " + std::to_string(p.pool_pages));
  require(p.page_order != nullptr || p.pool_pages == 0, "params.page_order must be set for a paged cache");
  std::vector<bool> seen(static_cast<std::size_t>(p.pool_pages), false);
  for (int i = 0; i < p.pool_pages; ++i) {
    const std::int32_t page = p.page_order[i];
    require(page >= 0 && page < p.pool_pages && !seen[page],
            "params.page_order must be a permutation of 0.." + std::to_string(p.pool_pages - 1) + ": entry " +
                std::to_string(i) + " is " + std::to_string(page));
    seen[page] = true;
  }
}

}  // namespace swa
