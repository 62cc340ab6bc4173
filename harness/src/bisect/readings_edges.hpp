#pragma once
// The window's edges as a tiled kernel computes them (golden/readings.hpp, EdgeRule): every rule
// that can change what a row sees, as settings of the readings table (readings_table.cpp).
#include <vector>

#include "readings_table.hpp"

namespace swa::harness {

// The tile sizes the edge rules try, for query tiles and key tiles alike.
inline constexpr int kEdgeTiles[] = {16, 32, 64, 128};

// Every edge rule that can change what a row sees, lower and upper, with its class and words.
std::vector<ReadingSetting> edge_settings(const AttnParams& p);

}  // namespace swa::harness
