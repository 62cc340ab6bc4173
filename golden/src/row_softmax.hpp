#pragma once
// Internal: the fp64 row kernel shared by the dense and the scheduled golden paths.
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace swa::golden::detail {

// Keys are scored from tiles of kKeyTile consecutive keys stored transposed, [head_size][kKeyTile]
// (one tile's K^T sits in L1 while every query row of a block takes it).
inline constexpr int kKeyTile = 16;

// Dims per plain sum in a score: a plain sum of kScoreBlock exact products is folded into a
// compensated (sum, err) pair per key (golden/README.md states the bound).
inline constexpr int kScoreBlock = 16;

// out[j] = scale * q . k for keys [first, first + count) of one tile, the blocks of kScoreBlock dims
// vectorised over keys; each key's arithmetic is independent of first and count (any tiling gives the
// same bits).
void scores_in_tile(const double* q, const double* tile, int first, int count, int head_size, double scale,
                    double* out);

// Appends scale * q . k_j for keys j in [first, first + count) of consecutive tiles starting at
// `tiles` (tile t at tiles + t * head_size * kKeyTile), with scores_in_tile's arithmetic.
void scores_from_tiles(const double* q, const double* tiles, std::int64_t first, std::int64_t count, int head_size,
                       double scale, std::vector<double>& scores);

// Soft-capping of already scaled scores: s -> cap * tanh(s / cap); cap == 0 leaves them alone.
void soft_cap(double* scores, std::size_t count, double cap);

struct RowStats {
  double row_max;
  double lse;
};

// Keys of a P.V sum are added in blocks that end where the key number reaches a multiple of this
// (two tiles: attend_block passes a whole block per call, so each row's (sum, err) is read and
// written once per block).
inline constexpr std::int64_t kValueBlock = 2 * kKeyTile;

// The row's softmax normaliser: m = max(scores, sink), scores[j] -> exp(scores[j] - m) in place, and
// l = exp(sink - m) + sum_j exp(s_j - m) compensated. No key: {sink, 0}.
struct RowNorm {
  double row_max;
  double l;
};
RowNorm exponentiate(double* scores, std::size_t count, double sink);

// (sum, err) += sum_j p[j] * values[j * head_size + (0, head_size)] for j in [0, count) (value rows
// contiguous), the j-th key numbered
// first_key + j: a plain sum over each block of keys between multiples of kValueBlock, folded into
// the compensated (sum, err) per dim.
// Splitting a row's keys at multiples of kValueBlock into several calls gives the same bits.
void accumulate_values(const double* p, const double* values, std::int64_t first_key, std::size_t count,
                       int head_size, double* sum, double* err);

// out = (sum + err) / l and the row's statistics; a row with l == 0 (no key) outputs 0.
RowStats finish_row(const RowNorm& norm, const double* sum, const double* err, int head_size, double* out);

}  // namespace swa::golden::detail
