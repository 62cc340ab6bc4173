#pragma once
// Keys counted another number of times than the spec's softmax counts them. A failing row no run of
// its own keys gives may still be its window's softmax with a few of its keys counted twice (a tile
// read with its end included), left out from inside the window (a loop that starts one late), or
// keys outside the window counted once. Each measured row's integer key weights are recovered: from
// the spec's run, greedily, the key whose one more or one fewer count most reduces the row's
// residual, until the weights give the DUT's row within its limit. Rules of which keys (the row's
// newest or oldest, the first or last key of each tile on a grid of positions, of the window, of the
// call, of the packed batch, a whole tile) are then fitted to those rows and computed on every row of
// the call kinds: the DUT's output is the golden's with the rule's weights, row by row.
#include <optional>
#include <set>
#include <vector>

#include "key_runs.hpp"
#include "row_runs.hpp"

namespace swa::harness {

// The keys whose count differs from the spec's run, sorted by key; nullopt when no such set of a few
// keys gives the row within its limit.
std::optional<std::vector<key_run_rules::SignedKey>> recover_key_weights(const key_run_rules::RowRuns& runs,
                                                                          const key_run_rules::RowPlace& r, const double* o,
                                                                          double limit);

// nullopt when some measured row is no such weighting of its keys. `measured` have their spec edges set.
std::optional<KeyRunFit> fit_key_weights(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                         const std::vector<double>& row_limit, const std::vector<key_run_rules::RowPlace>& measured,
                                         const std::set<key_run_rules::CallKind>& scope, const std::vector<int>& tiles,
                                         KeyRunFit fit);

}  // namespace swa::harness
