#include "row_softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lanes.hpp"
#if SWA_GOLDEN_LIBMVEC
#include <immintrin.h>
#endif
#include "swa/compensated.hpp"

namespace swa::golden::detail {

namespace {

// One TwoSum step on a register-held (sum, err) pair.
inline void accumulate(double& sum, double& err, double x) {
  const double s = sum + x;
  const double z = s - sum;
  err += (sum - (s - z)) + (x - z);
  sum = s;
}

}  // namespace

namespace {

// Scores of 4 * V consecutive keys of a tile, their (sum, err) pairs held in registers across every
// dim. Per key: a plain sum of kScoreBlock dims (the products are exact), then one TwoSum into the
// key's pair.
template <int V>
void scores_of_keys(const double* q, const double* k, int head_size, double scale, double* out) {
  Lanes4 sum[V], err[V], block[V];
  for (int v = 0; v < V; ++v) sum[v] = err[v] = splat4(0.0);
  int d = 0;
  for (; d + kScoreBlock <= head_size; d += kScoreBlock) {
    const double* kd = k + d * kKeyTile;
    const Lanes4 q0 = splat4(q[d]);
    for (int v = 0; v < V; ++v) block[v] = q0 * load4(kd + 4 * v);
    for (int t = 1; t < kScoreBlock; ++t) {
      const Lanes4 qt = splat4(q[d + t]);
      for (int v = 0; v < V; ++v) block[v] = add_exact_product(qt, load4(kd + t * kKeyTile + 4 * v), block[v]);
    }
    for (int v = 0; v < V; ++v) accumulate4(sum[v], err[v], block[v]);
  }
  for (; d < head_size; ++d) {
    const Lanes4 qd = splat4(q[d]);
    for (int v = 0; v < V; ++v) accumulate4(sum[v], err[v], qd * load4(k + d * kKeyTile + 4 * v));
  }
  for (int v = 0; v < V; ++v) store4(out + 4 * v, splat4(scale) * (sum[v] + err[v]));
}

// The same arithmetic for one key.
void score_of_key(const double* q, const double* k, int head_size, double scale, double* out) {
  double sum = 0.0, err = 0.0;
  int d = 0;
  for (; d + kScoreBlock <= head_size; d += kScoreBlock) {
    double block = q[d] * k[d * kKeyTile];
    for (int t = 1; t < kScoreBlock; ++t) block += q[d + t] * k[(d + t) * kKeyTile];
    accumulate(sum, err, block);
  }
  for (; d < head_size; ++d) accumulate(sum, err, q[d] * k[d * kKeyTile]);
  *out = scale * (sum + err);
}

#if SWA_GOLDEN_LANES8
// scores_of_keys<4>'s arithmetic for the 16 keys of a whole tile in two vectors of eight, NB blocks
// of kScoreBlock dims at a time: the blocks' plain sums do not depend on each other, so 2 NB
// multiply-add chains run side by side (one block at a time left the chain's latency exposed);
// each is then folded into its keys' (sum, err) in dim order, as one block at a time does.
template <int NB>
inline void score_blocks_of_16_keys(const double* q, const double* k, int d, Lanes8 (&sum)[2], Lanes8 (&err)[2]) {
  Lanes8 low[NB], high[NB];
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    const int db = d + b * kScoreBlock;
    const Lanes8 q0 = splat8(q[db]);
    low[b] = q0 * load8(k + db * kKeyTile);
    high[b] = q0 * load8(k + db * kKeyTile + 8);
  }
#pragma GCC unroll 16
  for (int t = 1; t < kScoreBlock; ++t)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      const int dt = d + b * kScoreBlock + t;
      const Lanes8 qt = splat8(q[dt]);
      low[b] = add_exact_product(qt, load8(k + dt * kKeyTile), low[b]);
      high[b] = add_exact_product(qt, load8(k + dt * kKeyTile + 8), high[b]);
    }
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    accumulate8(sum[0], err[0], low[b]);
    accumulate8(sum[1], err[1], high[b]);
  }
}

void scores_of_16_keys(const double* q, const double* k, int head_size, double scale, double* out) {
  static_assert(kKeyTile == 16);
  Lanes8 sum[2] = {splat8(0.0), splat8(0.0)}, err[2] = {splat8(0.0), splat8(0.0)};
  int d = 0;
  for (; d + 4 * kScoreBlock <= head_size; d += 4 * kScoreBlock) score_blocks_of_16_keys<4>(q, k, d, sum, err);
  for (; d + kScoreBlock <= head_size; d += kScoreBlock) score_blocks_of_16_keys<1>(q, k, d, sum, err);
  for (; d < head_size; ++d) {
    const Lanes8 qd = splat8(q[d]);
    accumulate8(sum[0], err[0], qd * load8(k + d * kKeyTile));
    accumulate8(sum[1], err[1], qd * load8(k + d * kKeyTile + 8));
  }
  store8(out, splat8(scale) * (sum[0] + err[0]));
  store8(out + 8, splat8(scale) * (sum[1] + err[1]));
}
#endif

}  // namespace

void scores_in_tile(const double* q, const double* tile, int first, int count, int head_size, double scale,
                    double* out) {
  // Each key's arithmetic does not depend on first, count or how keys are grouped into registers,
  // so any tiling gives the same bits.
  const double* k = tile + first;
  int j = 0;
#if SWA_GOLDEN_LANES8
  for (; j + 16 <= count; j += 16) scores_of_16_keys(q, k + j, head_size, scale, out + j);
#else
  for (; j + 16 <= count; j += 16) scores_of_keys<4>(q, k + j, head_size, scale, out + j);
#endif
  for (; j + 4 <= count; j += 4) scores_of_keys<1>(q, k + j, head_size, scale, out + j);
  for (; j < count; ++j) score_of_key(q, k + j, head_size, scale, out + j);
}

void scores_from_tiles(const double* q, const double* tiles, std::int64_t first, std::int64_t count, int head_size,
                       double scale, std::vector<double>& scores) {
  const std::size_t base = scores.size();
  scores.resize(base + count, 0.0);
  const std::int64_t tile_size = static_cast<std::int64_t>(head_size) * kKeyTile;
  for (std::int64_t j = first; j < first + count;) {
    const std::int64_t t = j / kKeyTile, end = std::min(first + count, (t + 1) * kKeyTile);
    scores_in_tile(q, tiles + t * tile_size, static_cast<int>(j - t * kKeyTile), static_cast<int>(end - j), head_size,
                   scale, scores.data() + base + (j - first));
    j = end;
  }
}

void soft_cap(double* scores, std::size_t count, double cap) {
  if (cap == 0.0) return;
  for (std::size_t j = 0; j < count; ++j) scores[j] = cap * std::tanh(scores[j] / cap);
}

namespace {

#if SWA_GOLDEN_LIBMVEC
// glibc's libmvec, four lanes per call (AVX2; within 4 ulp by glibc's contract, golden/README.md).
extern "C" __m256d _ZGVdN4v_exp(__m256d);
#endif

// x -> exp(x - shift) over scores.
void exp_shifted(double* x, std::size_t count, double shift) {
  std::size_t j = 0;
#if SWA_GOLDEN_LIBMVEC
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2)
    for (; j + 4 <= count; j += 4)
      _mm256_storeu_pd(x + j, _ZGVdN4v_exp(_mm256_sub_pd(_mm256_loadu_pd(x + j), _mm256_set1_pd(shift))));
#endif
  for (; j < count; ++j) x[j] = std::exp(x[j] - shift);
}

// *std::max_element(x, x + count), count > 0, in four registers of four lanes: a maximum is exact and
// does not depend on the order, so the lanes find its value (std::max_element's loop carried its
// running maximum through memory, 9 cycles a key). Where the order could show, a NaN (max_element's
// answer depends on its place) or a zero (its sign on which zero came first), the scalar loop
// answers.
double row_maximum(const double* x, std::size_t count) {
  using Mask4 = long long __attribute__((vector_size(32)));
  const Lanes4 lowest = splat4(-std::numeric_limits<double>::infinity());
  Lanes4 m[4] = {lowest, lowest, lowest, lowest};
  Mask4 unordered = {0, 0, 0, 0};
  std::size_t j = 0;
  for (; j + 16 <= count; j += 16)
    for (int v = 0; v < 4; ++v) {
      const Lanes4 y = load4(x + j + 4 * v);
      m[v] = y > m[v] ? y : m[v];
      unordered |= y != y;
    }
  double best = -std::numeric_limits<double>::infinity();
  for (int v = 0; v < 4; ++v)
    for (int lane = 0; lane < 4; ++lane) best = std::max(best, m[v][lane]);
  bool nan = unordered[0] | unordered[1] | unordered[2] | unordered[3];
  for (; j < count; ++j) {
    nan |= std::isnan(x[j]);
    best = std::max(best, x[j]);
  }
  if (nan || best == 0.0) return *std::max_element(x, x + count);
  return best;
}

}  // namespace

RowNorm exponentiate(double* scores, std::size_t count, double sink) {
  if (count == 0) return {sink, 0.0};
  const double row_max = std::max(row_maximum(scores, count), sink);
  exp_shifted(scores, count, row_max);
  // Four interleaved compensated lanes (key j in lane j % 4), folded lane by lane after the sink.
  Lanes4 sum = splat4(0.0), err = splat4(0.0);
  std::size_t j = 0;
  for (; j + 4 <= count; j += 4) accumulate4(sum, err, load4(scores + j));
  CompensatedSum denominator;
  if (sink > -std::numeric_limits<double>::infinity()) denominator.add(std::exp(sink - row_max));
  for (int lane = 0; lane < 4; ++lane) {
    denominator.add(sum[lane]);
    denominator.add(err[lane]);
  }
  for (; j < count; ++j) denominator.add(scores[j]);
  return {row_max, denominator.value()};
}

namespace {

// accumulate_value_dims<8> (below) spelled out in named registers, for lanes L of four or eight:
// 8 * lanes dims per pass. As an array, GCC kept the eight block sums on the stack around the loop
// (a memset before it, spills after it), which cost as much as the loop over a 16-key block itself.
// Per dim the same multiply-adds in the same key order, then the same TwoSum, at either width.
template <class L>
inline void accumulate_eight_vectors_of_value_dims(const double* p, const double* values, std::size_t count,
                                                   int head_size, int d, double* sum, double* err) {
  constexpr int kLanes = sizeof(L) / sizeof(double);
  L b0 = splat_lanes<L>(0.0), b1 = b0, b2 = b0, b3 = b0, b4 = b0, b5 = b0, b6 = b0, b7 = b0;
  for (std::size_t t = 0; t < count; ++t) {
    const L pt = splat_lanes<L>(p[t]);
    const double* vt = values + t * head_size + d;
    b0 = fused_multiply_add(pt, load_lanes<L>(vt), b0);
    b1 = fused_multiply_add(pt, load_lanes<L>(vt + kLanes), b1);
    b2 = fused_multiply_add(pt, load_lanes<L>(vt + 2 * kLanes), b2);
    b3 = fused_multiply_add(pt, load_lanes<L>(vt + 3 * kLanes), b3);
    b4 = fused_multiply_add(pt, load_lanes<L>(vt + 4 * kLanes), b4);
    b5 = fused_multiply_add(pt, load_lanes<L>(vt + 5 * kLanes), b5);
    b6 = fused_multiply_add(pt, load_lanes<L>(vt + 6 * kLanes), b6);
    b7 = fused_multiply_add(pt, load_lanes<L>(vt + 7 * kLanes), b7);
  }
  const L blocks[8] = {b0, b1, b2, b3, b4, b5, b6, b7};
  for (int v = 0; v < 8; ++v) {
    L s = load_lanes<L>(sum + d + kLanes * v), c = load_lanes<L>(err + d + kLanes * v);
    accumulate_lanes(s, c, blocks[v]);
    store_lanes(sum + d + kLanes * v, s);
    store_lanes(err + d + kLanes * v, c);
  }
}

// (sum, err)[d, d + 4V) += the plain sum over keys t of p[t] * values[t][d, d + 4V), in registers.
template <int V>
inline void accumulate_value_dims(const double* p, const double* values, std::size_t count, int head_size,
                                  int d, double* sum, double* err) {
  Lanes4 block[V];
  for (int v = 0; v < V; ++v) block[v] = splat4(0.0);
  for (std::size_t t = 0; t < count; ++t) {
    const Lanes4 pt = splat4(p[t]);
    const double* vt = values + t * head_size + d;
    for (int v = 0; v < V; ++v) block[v] = fused_multiply_add(pt, load4(vt + 4 * v), block[v]);
  }
  for (int v = 0; v < V; ++v) {
    Lanes4 s = load4(sum + d + 4 * v), c = load4(err + d + 4 * v);
    accumulate4(s, c, block[v]);
    store4(sum + d + 4 * v, s);
    store4(err + d + 4 * v, c);
  }
}

}  // namespace

void accumulate_values(const double* p, const double* values, std::int64_t first_key, std::size_t count,
                       int head_size, double* __restrict sum, double* __restrict err) {
  for (std::size_t j = 0; j < count;) {
    // This block ends at the next multiple of kValueBlock in key numbering.
    const std::int64_t key = first_key + static_cast<std::int64_t>(j);
    const std::size_t n = std::min<std::size_t>(count - j, static_cast<std::size_t>(kValueBlock - key % kValueBlock));
    const double* block_values = values + j * head_size;
    int d = 0;
    // Eight vectors of dims per pass (measured fastest: eight independent add chains).
#if SWA_GOLDEN_LANES8
    for (; d + 64 <= head_size; d += 64)
      accumulate_eight_vectors_of_value_dims<Lanes8>(p + j, block_values, n, head_size, d, sum, err);
#endif
    for (; d + 32 <= head_size; d += 32)
      accumulate_eight_vectors_of_value_dims<Lanes4>(p + j, block_values, n, head_size, d, sum, err);
    for (; d + 4 <= head_size; d += 4) accumulate_value_dims<1>(p + j, block_values, n, head_size, d, sum, err);
    for (; d < head_size; ++d) {
      double block = 0.0;
      for (std::size_t t = 0; t < n; ++t) block = std::fma(p[j + t], block_values[t * head_size + d], block);
      accumulate(sum[d], err[d], block);
    }
    j += n;
  }
}

RowStats finish_row(const RowNorm& norm, const double* sum, const double* err, int head_size, double* out) {
  if (norm.l == 0.0) {
    std::fill(out, out + head_size, 0.0);
    return {norm.row_max, norm.row_max};
  }
  for (int d = 0; d < head_size; ++d) out[d] = (sum[d] + err[d]) / norm.l;
  return {norm.row_max, norm.row_max + std::log(norm.l)};
}

}  // namespace swa::golden::detail
