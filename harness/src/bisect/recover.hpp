#pragma once
// Bisect's fallback when no variant explains a failure: recover the attention a DUT computed for one
// query row. A softmax kernel's output row is a convex combination of V rows, so a non-negative
// least-squares fit o ~ sum_j w_j v_j over every V row the kernel could have read (every position
// of every sequence, every kv head) gives its weights; compared with the golden's they say which
// keys it added or dropped, and whether it weighed the right keys wrongly.
#include <cstdint>
#include <string>
#include <vector>

#include "swa/harness/problem.hpp"

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
  bool well_posed = false;       // more dimensions than candidates
};

// Lawson-Hanson active-set NNLS: argmin |A w - b| subject to w >= 0, A column-major rows x cols.
std::vector<double> nonnegative_least_squares(const std::vector<double>& a, int rows, int cols,
                                              const std::vector<double>& b);

// The row (sequence, token, q head) of `out` ([nTokens, Hq, D]) recovered against pr's V.
RecoveredRow recover_row(const Problem& pr, const std::vector<double>& out, int sequence, std::int64_t token,
                         int q_head);

// The recovered row in words: a first line naming the class of the difference from the golden, then
// the evidence (which keys, with which weights, relative to the window, the query, the sequence
// and the kv head), or why the fit cannot tell.
std::string describe_recovery(const RecoveredRow& r, const AttnParams& p);

}  // namespace swa::harness
