#pragma once
// Internal: the fp64 row kernel shared by the dense and the scheduled golden paths.
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace swa::golden::detail {

// q.k with every product exact (float-valued inputs) and a compensated sum.
double dot_exact_products(const double* a, const double* b, int n);

// out[j] = scale * q . k_j for keys j in [first, first + count) of a transposed K block
// (kT[d * key_stride + j]); err is scratch of count doubles. A plain sum of 8 dims (exact products)
// is folded into a compensated (sum, err) pair per key, so it vectorises over keys; each key's
// arithmetic is independent of first and count (any tiling gives the same bits).
void scores_tile(const double* q, const double* kT, std::int64_t key_stride, std::int64_t first, std::int64_t count,
                 int head_size, double scale, double* out, double* err);

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
  std::vector<double> acc_sum, acc_err, block;
};

// Soft-capping of already scaled scores: s -> cap * tanh(s / cap); cap == 0 leaves them alone.
void soft_cap(double* scores, std::size_t count, double cap);

struct RowStats {
  double row_max;
  double lse;
};

// Keys of a P.V sum are added in blocks that end where the key number reaches a multiple of this.
inline constexpr std::int64_t kValueBlock = 16;

// The row's softmax normaliser: m = max(scores, sink), scores[j] -> exp(scores[j] - m) in place, and
// l = exp(sink - m) + sum_j exp(s_j - m) compensated. No key: {sink, 0}.
struct RowNorm {
  double row_max;
  double l;
};
RowNorm exponentiate(double* scores, std::size_t count, double sink);

// (sum, err) += sum_j p[j] * values[j][0, head_size) for j in [0, count), the j-th key numbered
// first_key + j: a plain sum over each block of keys between multiples of kValueBlock, folded into
// the compensated (sum, err) per dim. Every loop runs over dims; block is scratch of head_size.
// Splitting a row's keys at multiples of kValueBlock into several calls gives the same bits.
void accumulate_values(const double* p, const double* const* values, std::int64_t first_key, std::size_t count,
                       int head_size, double* sum, double* err, double* block);

// out = (sum + err) / l and the row's statistics; a row with l == 0 (no key) outputs 0.
RowStats finish_row(const RowNorm& norm, const double* sum, const double* err, int head_size, double* out);

// On entry scratch.scores[j] holds the scaled (and capped) score of key j and scratch.values[j] its
// value row. `sink` (-inf = none) is one more logit in the denominator with no value row: with
// m = max(row max, sink), l = sum_j exp(s_j - m) + exp(sink - m). Leaves probabilities in
// scratch.scores and writes out[0, head_size); a row with no key outputs 0 (lse = sink, or -inf).
// first_key numbers the keys for accumulate_values' blocks (a dense row: its first key's position).
RowStats softmax_times_values(RowScratch& scratch, int head_size, double* out,
                              double sink = -std::numeric_limits<double>::infinity(), std::int64_t first_key = 0);

}  // namespace swa::golden::detail
