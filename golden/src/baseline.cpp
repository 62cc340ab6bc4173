#include "swa/baseline.hpp"

#include "expf_lanes.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

namespace swa::baseline {
namespace {

using Floats4 = float __attribute__((vector_size(16)));
using Floats8 = float __attribute__((vector_size(32)));
using Floats16 = float __attribute__((vector_size(64)));

// fp32 q.k in the order a SIMD GEMM micro-kernel uses: eight partial sums over d mod 8, then
// combined as ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)).
float dot_fp32(const float* q, const float* k, int n) {
  float s[8] = {};
  int d = 0;
  for (; d + 8 <= n; d += 8)
    for (int l = 0; l < 8; ++l) s[l] += q[d + l] * k[d + l];
  for (int l = 0; d < n; ++d, ++l) s[l] += q[d] * k[d];
  return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

// dot_fp32 of one q against keys k[0], k[1], ... k[K - 1] (rows head_size apart), each key its own
// eight partial sums, so K independent add chains run side by side: the same bits as dot_fp32.
template <int K>
void dot_fp32_keys(const float* q, const float* k, int n, float* out) {
  static_assert(K % 4 == 0);
  Floats8 s[K];
#pragma GCC unroll 8
  for (int key = 0; key < K; ++key) s[key] = Floats8{};
  int d = 0;
  for (; d + 8 <= n; d += 8) {
    Floats8 qd;
    std::memcpy(&qd, q + d, sizeof qd);
#pragma GCC unroll 8
    for (int key = 0; key < K; ++key) {
      Floats8 kd;
      std::memcpy(&kd, k + key * n + d, sizeof kd);
      s[key] = s[key] + qd * kd;
    }
  }
  if (d < n) {
    // The last n - d dims in lanes 0 .. n - d - 1 and zeros above: those lanes add +0 * +0 = +0, which
    // leaves a partial sum's bits as they are (a sum of products that starts at +0 is never -0), so
    // the accumulators stay in registers instead of being indexed in memory.
    Floats8 qd{};
    for (int l = 0; d + l < n; ++l) qd[l] = q[d + l];
#pragma GCC unroll 8
    for (int key = 0; key < K; ++key) {
      Floats8 kd{};
      for (int l = 0; d + l < n; ++l) kd[l] = k[key * n + d + l];
      s[key] = s[key] + qd * kd;
    }
  }
  // ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) for four keys at once, each add the scalar
  // tree's pair: t_l = s_l + s_(l+4) of two keys per vector, u_0 = t_0 + t_2 and u_1 = t_1 + t_3 of
  // four keys, then u_0 + u_1.
  for (int key0 = 0; key0 < K; key0 += 4) {
    const Floats8 t01 = __builtin_shufflevector(s[key0], s[key0 + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
                        __builtin_shufflevector(s[key0], s[key0 + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    const Floats8 t23 = __builtin_shufflevector(s[key0 + 2], s[key0 + 3], 0, 1, 2, 3, 8, 9, 10, 11) +
                        __builtin_shufflevector(s[key0 + 2], s[key0 + 3], 4, 5, 6, 7, 12, 13, 14, 15);
    const Floats8 u = __builtin_shufflevector(t01, t23, 0, 1, 4, 5, 8, 9, 12, 13) +
                      __builtin_shufflevector(t01, t23, 2, 3, 6, 7, 10, 11, 14, 15);
    const Floats4 sum = __builtin_shufflevector(u, u, 0, 2, 4, 6) + __builtin_shufflevector(u, u, 1, 3, 5, 7);
    std::memcpy(out + key0, &sum, sizeof sum);
  }
}

// Whole cache lines for Q, K, V and the P.V accumulators: a row of a multiple of 16 floats then starts
// on a line, and no 16-lane load of it straddles two (a tenth of the baseline's time on this machine).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kAlign); }
  friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) { return true; }
};
using Rows = std::vector<float, CacheLineAllocator<float>>;

// Rows [0, len) of one sequence and head of a packed tensor, as contiguous floats.
void load_rows(const AttnParams& p, const void* base, std::int64_t row_stride, std::int64_t head_stride, int b,
               int head, Rows& rows) {
  const auto* bytes = static_cast<const unsigned char*>(base);
  const std::size_t elem = dtype_bytes(p.dtype);
  const std::int64_t len = p.seq_lens[b];
  rows.resize(static_cast<std::size_t>(len) * p.head_size);
  for (std::int64_t j = 0; j < len; ++j)
    load_all_from(p.dtype, bytes + ((p.seq_offsets[b] + j) * row_stride + head * head_stride) * elem,
                  static_cast<std::size_t>(p.head_size), &rows[j * p.head_size]);
}

template <class Vec>
Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// acc[d, d + V vectors) += p[j - first] * v[j][d, d + V vectors) for keys j in [first, end), in
// position order: fp32 products then fp32 adds, lane by lane, so 16-lane vectors give the bits of
// 8-lane ones. The accumulators stay in registers across the keys (the unrolled loops).
template <class Vec, int V>
void add_weighted_values(const float* p, const float* v, int head_size, std::int64_t first, std::int64_t end, int d,
                         float* acc) {
  constexpr int kLanes = sizeof(Vec) / sizeof(float);
  Vec sum[V];
#pragma GCC unroll 8
  for (int u = 0; u < V; ++u) sum[u] = load<Vec>(acc + d + kLanes * u);
  for (std::int64_t j = first; j < end; ++j) {
    const float x = p[j - first];
    Vec pv;
    if constexpr (kLanes == 16)
      pv = Vec{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
    else
      pv = Vec{x, x, x, x, x, x, x, x};
    const float* vj = v + j * head_size + d;
#pragma GCC unroll 8
    for (int u = 0; u < V; ++u) sum[u] = sum[u] + pv * load<Vec>(vj + kLanes * u);
  }
  std::memcpy(acc + d, sum, sizeof sum);
}

void add_weighted_values(const float* p, const float* v, int head_size, std::int64_t first, std::int64_t end,
                         float* acc) {
  int d = 0;
  for (; d + 64 <= head_size; d += 64) add_weighted_values<Floats16, 4>(p, v, head_size, first, end, d, acc);
  for (; d + 8 <= head_size; d += 8) add_weighted_values<Floats8, 1>(p, v, head_size, first, end, d, acc);
  for (; d < head_size; ++d)
    for (std::int64_t j = first; j < end; ++j) acc[d] += p[j - first] * v[j * head_size + d];
}

// *std::max_element(row, row_end), sixteen lanes at a time: the maximum of numbers is the same in
// any order, up to the sign of a zero, which exp(s - m) does not see. A NaN makes the order
// matter, so such a row takes std::max_element itself.
float row_max(const float* row, const float* row_end) {
  const std::ptrdiff_t n = row_end - row;
  std::ptrdiff_t i = 0;
  float m = -INFINITY;
  if (n >= 16) {
    Floats16 lanes = load<Floats16>(row), nan = lanes != lanes ? lanes : Floats16{};
    for (i = 16; i + 16 <= n; i += 16) {
      const Floats16 x = load<Floats16>(row + i);
      lanes = x > lanes ? x : lanes;
      nan = x != x ? x : nan;
    }
    for (int l = 0; l < 16; ++l) {
      if (nan[l] != 0.f) return *std::max_element(row, row_end);
      m = std::max(m, lanes[l]);
    }
  }
  for (; i < n; ++i) {
    if (row[i] != row[i]) return *std::max_element(row, row_end);
    m = std::max(m, row[i]);
  }
  return m;
}

// Query rows per block, and keys per tile: a tile of K or V rows (16 KB at D 128) stays in L1 while
// every row of the block takes it, instead of each row streaming its whole window from memory.
// Tiling changes no row's arithmetic: scores are per key, and P.V adds keys in position order.
constexpr std::int64_t kBlockRows = 16;
constexpr std::int64_t kTileKeys = 32;

}  // namespace

std::vector<float> attention(const AttnParams& p) {
  validate(p);
  const std::int64_t n = total_tokens(p);
  const int D = p.head_size;
  const DType dt = p.dtype;
  std::vector<float> out(static_cast<std::size_t>(n) * p.heads_q * D, 0.f);
  const std::int64_t units = static_cast<std::int64_t>(p.batch) * p.heads_q;
#pragma omp parallel
  {
    Rows q, k, v, acc;
    std::vector<float> scores;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t unit = 0; unit < units; ++unit) {
      const int b = static_cast<int>(unit / p.heads_q);
      const int h = static_cast<int>(unit % p.heads_q);
      const int kvh = kv_head_for(h, p.heads_q, p.heads_kv);
      const std::int64_t len = p.seq_lens[b];
      load_rows(p, p.q, p.q_row_stride, p.q_head_stride, b, h, q);
      load_rows(p, p.k, p.k_row_stride, p.k_head_stride, b, kvh, k);
      load_rows(p, p.v, p.v_row_stride, p.v_head_stride, b, kvh, v);
      // The same quantisation as the golden's: exact in fp32 too.
      kv_read_values(p.kv_format, p.k_descale, k.data(), k.size());
      kv_read_values(p.kv_format, p.v_descale, v.data(), v.size());
      for (float& x : q) x *= p.scale;
      round_all_to(dt, q.data(), q.size());
      for (std::int64_t i0 = 0; i0 < len; i0 += kBlockRows) {
        const std::int64_t i1 = std::min(len, i0 + kBlockRows);
        const auto first_of = [&](std::int64_t i) { return band_first_key(p.band, i); };
        const auto end_of = [&](std::int64_t i) { return band_end_key(p.band, i, len); };
        std::int64_t lo = len, hi = 0;
        for (std::int64_t i = i0; i < i1; ++i)
          if (first_of(i) < end_of(i)) {
            lo = std::min(lo, first_of(i));
            hi = std::max(hi, end_of(i));
          }
        const std::int64_t span = std::max<std::int64_t>(0, hi - lo);
        scores.assign(static_cast<std::size_t>((i1 - i0) * span), 0.f);
        // Row i's score of key j (lo <= j <= hi): a pointer inside the block's buffer, one past it at most.
        const auto score_of = [&](std::int64_t i, std::int64_t j) { return scores.data() + (i - i0) * span + (j - lo); };
        for (std::int64_t t0 = lo; t0 < hi; t0 += kTileKeys)
          for (std::int64_t i = i0; i < i1; ++i) {
            const std::int64_t f = std::max(t0, first_of(i)), e = std::min(t0 + kTileKeys, end_of(i));
            std::int64_t j = f;
            for (; j + 8 <= e; j += 8) dot_fp32_keys<8>(&q[i * D], &k[j * D], D, score_of(i, j));
            for (; j + 4 <= e; j += 4) dot_fp32_keys<4>(&q[i * D], &k[j * D], D, score_of(i, j));
            for (; j < e; ++j) *score_of(i, j) = dot_fp32(&q[i * D], &k[j * D], D);
          }
        for (std::int64_t i = i0; i < i1; ++i) {
          if (first_of(i) >= end_of(i)) continue;
          float* const row = score_of(i, first_of(i));
          float* const row_end = score_of(i, end_of(i));
          round_all_to(dt, row, static_cast<std::size_t>(row_end - row));
          if (p.softcap > 0.f)
            for (float* s = row; s < row_end; ++s) *s = round_to(dt, p.softcap * std::tanh(*s / p.softcap));
          const float sink = p.sinks ? p.sinks[h] : -INFINITY;
          const float m = std::max(row_max(row, row_end), sink);
          golden::detail::exp_of_differences(row, static_cast<std::size_t>(row_end - row), m);
          float sum = p.sinks ? std::exp(sink - m) : 0.f;
          for (const float* s = row; s < row_end; ++s) sum += *s;  // in position order
          for (float* s = row; s < row_end; ++s) *s = *s / sum;
          round_all_to(dt, row, static_cast<std::size_t>(row_end - row));
        }
        acc.assign(static_cast<std::size_t>((i1 - i0) * D), 0.f);
        for (std::int64_t t0 = lo; t0 < hi; t0 += kTileKeys)
          for (std::int64_t i = i0; i < i1; ++i) {
            const std::int64_t f = std::max(t0, first_of(i)), e = std::min(t0 + kTileKeys, end_of(i));
            if (e > f) add_weighted_values(score_of(i, f), v.data(), D, f, e, &acc[(i - i0) * D]);
          }
        for (std::int64_t i = i0; i < i1; ++i) {
          float* o = &out[(static_cast<std::size_t>(p.seq_offsets[b] + i) * p.heads_q + h) * D];
          if (first_of(i) >= end_of(i)) continue;  // no visible key: 0
          std::copy_n(&acc[(i - i0) * D], D, o);
          round_all_to(dt, o, static_cast<std::size_t>(D));
        }
      }
    }
  }
  return out;
}

}  // namespace swa::baseline
