#pragma once
// Internal: the fp64 row kernel shared by the dense and the scheduled golden paths.
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace swa::golden::detail {

// q.k with every product exact (float-valued inputs) and a compensated sum.
double dot_exact_products(const double* a, const double* b, int n);

// scores[j] = scale * q . k_j for keys j in [first, first + count) of a transposed K block
// (kT[d * key_stride + j]). Compensated across d for every key at once, so it vectorises over keys.
// Appends to `scores`.
void scores_from_transposed(const double* q, const double* kT, std::int64_t key_stride, std::int64_t first,
                            std::int64_t count, int head_size, double scale, std::vector<double>& scores,
                            std::vector<double>& err);

struct RowScratch {
  std::vector<double> scores;
  std::vector<double> score_err;
  std::vector<const double*> values;
  std::vector<double> acc_sum, acc_err;
};

// Soft-capping of already scaled scores: s -> cap * tanh(s / cap); cap == 0 leaves them alone.
void soft_cap(double* scores, std::size_t count, double cap);

struct RowStats {
  double row_max;
  double lse;
};

// On entry scratch.scores[j] holds the scaled (and capped) score of key j and scratch.values[j] its
// value row. `sink` (-inf = none) is one more logit in the denominator with no value row: with
// m = max(row max, sink), l = sum_j exp(s_j - m) + exp(sink - m). Leaves probabilities in
// scratch.scores and writes out[0, head_size); a row with no key outputs 0 (lse = sink, or -inf).
RowStats softmax_times_values(RowScratch& scratch, int head_size, double* out,
                              double sink = -std::numeric_limits<double>::infinity());

}  // namespace swa::golden::detail
