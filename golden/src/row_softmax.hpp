#pragma once
// Internal: the fp64 row kernel shared by the dense and the scheduled golden paths.
#include <cstdint>
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

struct RowStats {
  double row_max;
  double lse;
};

// On entry scratch.scores[j] holds the scaled score of key j and scratch.values[j] its value row.
// Leaves probabilities in scratch.scores and writes out[0, head_size).
RowStats softmax_times_values(RowScratch& scratch, int head_size, double* out);

}  // namespace swa::golden::detail
