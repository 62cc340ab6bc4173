#pragma once
// Output rows in the wrong place: each failing row of the DUT's output held against every row of the
// golden's. When every failing row is another row's golden output (within its own limit), the DUT
// computed the right rows and wrote them to the wrong places (or read its Q, K and V for another
// row): the map, summarised by what it does to the sequence, the token and the head, reproduces the
// output. A row that matches several rows alike (a constant output) is not counted as placed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "finding.hpp"
#include "swa/params.hpp"

namespace swa::harness {

struct Placement {
  std::int64_t failing = 0, placed = 0;  // failing rows, of them equal to another row's golden output
  std::vector<std::string> patterns;     // "sequence 1's decode rows hold sequence 2's (the same token and head)", most first
};

// out, ref: [nTokens, Hq, D]; row_limit: per token row. Nothing when at most half the failing rows (or fewer
// than 4) are placed; high (reproduced) when every one is.
std::optional<Placement> fit_output_placement(const AttnParams& p, const std::vector<double>& out, const std::vector<double>& ref,
                                              const std::vector<double>& row_limit);

Finding placement_finding(const Placement& placement);

}  // namespace swa::harness
