#pragma once
// Split-KV merges, fitted. A kernel that splits a row's keys into runs of T keys (FlashDecoding,
// FlashInfer's plan/run/combine, FA3's split-KV) computes each split's softmax alone and merges the
// partial outputs with weights from their log-sum-exps. When the merge is wrong, every failing row is
// still a weighted sum of its splits' partial outputs, the golden's own, with weights other than
// their shares of the row's mass. Each measured row's split weights are solved (least squares, a few
// unknowns against the head's dims) on every grid the splits may lie on (T keys counted from
// position 0, the window's first key, the call's first row, the packed batch, or back from the newest
// key), the coarsest grid that gives every measured row within its limit is kept, and then a merge
// rule with a few shared parameters is fitted to the outputs themselves: weights
// e^(gamma*lse + beta*max) over their sum and a sink term e^sigma, or not divided at all, or rounded
// to a 16-bit type. The rule is computed on every row of the call kinds (a reproduction); without one
// the finding says what the solved weights are.
#include <optional>
#include <set>
#include <vector>

#include "key_runs.hpp"
#include "row_runs.hpp"

namespace swa::harness {

// nullopt when some measured row is no merge of its splits on any grid (with at most 16 splits, and
// at most a quarter of the head's dims). `measured` have their spec edges set.
std::optional<KeyRunFit> fit_split_merge(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                         const std::vector<double>& row_limit, const std::vector<key_run_rules::RowPlace>& measured,
                                         const std::set<key_run_rules::CallKind>& scope, KeyRunFit fit);

}  // namespace swa::harness
