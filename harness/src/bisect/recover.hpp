#pragma once
// Bisect's fallback when no variant explains a failure: recover the attention a DUT computed for its
// failing query rows. A softmax kernel's output row is a convex combination of V rows, so a
// non-negative least-squares fit o ~ sum_j w_j v_j over every V row the kernel could have read
// (every position of every sequence, every kv head: future keys, other sequences' keys and every
// key the cache ever held) gives its weights; compared with the golden's across the failing rows
// they say which keys it added or dropped, and whether it weighed the right keys wrongly.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "finding.hpp"
#include "swa/harness/case/problem.hpp"

namespace swa::harness {

struct AttentionCandidate {
  int sequence = 0;
  std::int64_t position = 0;
  int kv_head = 0;
};

struct RecoveredRow {
  int sequence = 0, q_head = 0;
  std::int64_t token = 0;
  std::vector<AttentionCandidate> candidates;
  std::vector<double> weights;  // the DUT's, by non-negative least squares
  std::vector<double> golden;   // the golden's probability of each candidate (0 outside the window)
  std::vector<double> scores;   // the golden's scaled score of each candidate of the right kv head
  double relative_residual = 0;  // |V w - o| / |o|
  bool well_posed = false;       // at least twice as many dimensions as candidates
};

// Lawson-Hanson active-set NNLS: argmin |A w - b| subject to w >= 0, A column-major rows x cols.
std::vector<double> nonnegative_least_squares(const std::vector<double>& a, int rows, int cols,
                                              const std::vector<double>& b);

// The candidates a fit of this problem has: every position of every sequence, every kv head.
std::int64_t candidate_count(const AttnParams& p);

// The row (sequence, token, q head) of `out` ([nTokens, Hq, D]) recovered against pr's V.
RecoveredRow recover_row(const Problem& pr, const std::vector<double>& out, int sequence, std::int64_t token,
                         int q_head);

// The recovered rows (failing rows of one case, in schedule order) told as one finding: the first
// sentence names the class, then the evidence, or why the fit cannot tell ("not_told").
Finding classify_recovery(const std::vector<RecoveredRow>& rows, const AttnParams& p);

// A kernel that holds K/V in a narrower type than the layer's: a row that sees a single key outputs
// that key's V exactly in a correct kernel; when every failing such row outputs V rounded to fp16 (or
// bf16) instead, the values went through that type. nullopt when there is no such evidence.
std::optional<Finding> narrow_value_storage(const Problem& pr, const std::vector<double>& out,
                                            const std::vector<double>& ref, double threshold);

}  // namespace swa::harness
