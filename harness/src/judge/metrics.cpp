#include "swa/harness/judge/metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace swa::harness {
namespace {

// Eight elements at a time in GCC vector types: AVX-512 registers where the CPU has them, two AVX2
// or four SSE ones where it does not, with the same lanes and so the same bits on every machine.
constexpr int kLanes = 8;
using Doubles = double __attribute__((vector_size(8 * kLanes)));
using Floats = float __attribute__((vector_size(4 * kLanes)));
using Ints = std::int64_t __attribute__((vector_size(8 * kLanes)));  // and the masks of Doubles' compares

// x in every lane, as one initializer (a broadcast instruction; a store per lane became eight
// masked broadcasts).
template <class V, class T>
V broadcast(T x) {
  static_assert(kLanes == 8);
  return V{x, x, x, x, x, x, x, x};
}

// Whether a[i] >= b[i] in any lane (false for NaN, as the vector compare): one mask compare where the
// build targets AVX-512, elsewhere the mask's halves OR-ed together in registers. (A memcmp of the
// mask against zero stored it and loaded it back in pieces, stalling store forwarding.)
bool any_at_least(Doubles a, Doubles b) {
#if defined(__AVX512F__)
  return _mm512_cmp_pd_mask(a, b, _CMP_GE_OQ) != 0;
#else
  Ints mask = a >= b;
  mask |= __builtin_shufflevector(mask, mask, 4, 5, 6, 7, 0, 1, 2, 3);
  mask |= __builtin_shufflevector(mask, mask, 2, 3, 0, 1, 2, 3, 0, 1);
  mask |= __builtin_shufflevector(mask, mask, 1, 0, 1, 0, 1, 0, 1, 0);
  return mask[0] != 0;
#endif
}

// Eight elements with the non-finite outputs (and lanes outside `valid`) left out: their output and
// reference as zero, so they add nothing to any sum, and |out - ref|.
struct FiniteLanes {
  Ints finite;
  Doubles out, ref, error;
};
FiniteLanes finite_lanes(Floats out, Doubles ref, Ints valid) {
  const Doubles o = __builtin_convertvector(out, Doubles);
  const Ints finite = ((o - o) == 0) & valid;  // inf - inf and NaN - NaN are NaN
  const Doubles zero{};
  const Doubles om = finite ? o : zero, r = finite ? ref : zero;
  const Doubles diff = om - r;
  return {finite, om, r, diff < 0 ? -diff : diff};
}

// Lane j of each accumulator takes the elements whose index is j modulo 8, in index order.
struct Lanes {
  Doubles sum_abs{}, sum_sq{}, ref_sq{}, out_sq{}, dot{};
  Doubles max_abs{}, max_rel{}, out_max_abs{};
  Ints worst = broadcast<Ints>(std::int64_t{-1});
  Ints first_nonfinite = broadcast<Ints>(std::numeric_limits<std::int64_t>::max());
  Ints finite{}, nan{}, nonfinite{}, over{}, max_ulp{}, sum_ulp{};

  // Elements index0 .. index0 + 7; a lane outside `valid` (the tail of the tensor) counts nowhere.
  // kAllFinite: the caller checked that every output is finite and every lane valid, so the masks
  // that would be all true (or all false) are left out, and the caller counts the elements finite;
  // the operations are otherwise the same, and so are the bits.
  template <bool kAllFinite>
  void add(Floats out, Doubles ref, Ints ulps, Ints index, Ints valid, double rel_floor, double threshold) {
    const Doubles o = __builtin_convertvector(out, Doubles);
    Ints is_finite{};
    Doubles om, r, e;
    if constexpr (kAllFinite) {
      const Doubles diff = o - ref;
      om = o;
      r = ref;
      e = diff < 0 ? -diff : diff;
    } else {
      const FiniteLanes f = finite_lanes(out, ref, valid);
      is_finite = f.finite;
      om = f.out;
      r = f.ref;
      e = f.error;
    }
    const Doubles abs_r = r < 0 ? -r : r, abs_o = om < 0 ? -om : om;
    const Doubles floor = broadcast<Doubles>(rel_floor);
    const Doubles den = abs_r < floor ? floor : abs_r;
    // The division only when some lane may raise its maximum: e / den rounds above max_rel only when
    // e >= max_rel * den, and the bound below is smaller than that product whatever its rounding.
    if (any_at_least(e, max_rel * den * 0.999999)) {
      const Doubles rel = e / den;
      // NaN ratios (0 / 0 where ref and the floor are 0) never raise the maximum, as std::max(max, NaN).
      max_rel = rel > max_rel ? rel : max_rel;
    }
    // The first index of the largest error: a later lane element replaces it only when larger.
    Ints take = (e > max_abs) | (worst < 0);
    if constexpr (!kAllFinite) take &= is_finite;
    max_abs = take ? e : max_abs;
    worst = take ? index : worst;
    out_max_abs = abs_o > out_max_abs ? abs_o : out_max_abs;
    sum_abs += e;
    sum_sq += e * e;
    ref_sq += r * r;
    out_sq += om * om;
    dot += om * r;
    Ints over_now = e > broadcast<Doubles>(threshold);
    if constexpr (!kAllFinite) {
      ulps = is_finite ? ulps : Ints{};
      over_now &= is_finite;
      finite -= is_finite;  // masks are -1 where true
      nan -= (o != o) & valid;
      const Ints not_finite = ~is_finite & valid;
      nonfinite -= not_finite;
      first_nonfinite =
          (not_finite & (first_nonfinite == std::numeric_limits<std::int64_t>::max())) ? index : first_nonfinite;
    }
    max_ulp = ulps > max_ulp ? ulps : max_ulp;
    sum_ulp += ulps;
    if (threshold > 0) over -= over_now;
  }
};

// Lanes::add of elements [k, n) of a chunk starting at element i0, in whole groups of eight (fixed-size
// copies: vector loads, not rep movs); returns where the groups end.
template <bool kAllFinite>
std::int64_t add_groups(Lanes& lanes, const float* out, const double* ref, const std::int64_t* ulps, std::int64_t k,
                        std::int64_t n, std::int64_t i0, double rel_floor, double threshold) {
  Ints lane_index;
  for (int i = 0; i < kLanes; ++i) lane_index[i] = i;
  const Ints all = broadcast<Ints>(std::int64_t{-1});
  for (; k + kLanes <= n; k += kLanes) {
    Floats o;
    Doubles r;
    Ints u;
    std::memcpy(&o, out + k, sizeof o);
    std::memcpy(&r, ref + k, sizeof r);
    std::memcpy(&u, ulps + k, sizeof u);
    lanes.add<kAllFinite>(o, r, u, lane_index + broadcast<Ints>(i0 + k), all, rel_floor, threshold);
  }
  return k;
}

// Whether none of the n floats is NaN or infinite (an exponent field of all ones).
bool all_finite(const float* x, std::int64_t n) {
  using Bits = std::uint32_t __attribute__((vector_size(4 * 16)));
  constexpr std::uint32_t kExponent = 0x7f800000u;
  Bits top{};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Bits b;
    std::memcpy(&b, x + i, sizeof b);
    b &= kExponent;
    top = b > top ? b : top;
  }
  std::uint32_t t = 0;
  for (int j = 0; j < 16; ++j) t = std::max(t, top[j]);
  for (; i < n; ++i) {
    std::uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    t = std::max(t, b & kExponent);
  }
  return t != kExponent;
}

// The eight lanes of a sum in a fixed tree: ((0+1)+(2+3))+((4+5)+(6+7)).
double lane_sum(Doubles v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }
template <class V>
auto lane_max(V v) {
  auto m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
std::int64_t lane_total(Ints v) {
  std::int64_t t = 0;
  for (int i = 0; i < kLanes; ++i) t += v[i];
  return t;
}

double max_abs_of(std::span<const double> ref) {
  // Lane maxima (a maximum is exact in any order); a NaN never wins, as with std::max. Four
  // independent maxima, so the loop is not one chain of compare-and-blend latencies (a fifth of
  // compare() on ci.yaml with one).
  constexpr int kChains = 4;
  Doubles m[kChains] = {};
  const auto take = [](Doubles& chain, const double* at) {
    Doubles r;
    std::memcpy(&r, at, sizeof r);
    r = r < 0 ? -r : r;
    chain = r > chain ? r : chain;
  };
  std::size_t i = 0;
  for (; i + kChains * kLanes <= ref.size(); i += kChains * kLanes)
    for (int c = 0; c < kChains; ++c) take(m[c], &ref[i + c * kLanes]);
  for (; i + kLanes <= ref.size(); i += kLanes) take(m[0], &ref[i]);
  for (int c = 1; c < kChains; ++c) m[0] = m[c] > m[0] ? m[c] : m[0];
  double top = lane_max(m[0]);
  for (; i < ref.size(); ++i) top = std::max(top, std::abs(ref[i]));
  return top;
}

}  // namespace

Comparison compare(std::span<const float> out, std::span<const double> ref, DType dtype, double threshold) {
  Comparison c;
  c.elements = static_cast<std::int64_t>(out.size());
  c.ref_max_abs = max_abs_of(ref);
  c.rel_floor = 1e-2 * c.ref_max_abs;
  Lanes lanes;
  std::int64_t finite_elements = 0;  // those counted outside the lanes
  // ULP distances go a chunk at a time through the batch conversion (ulp_distances).
  constexpr std::int64_t kChunk = 1024;
  alignas(64) std::array<float, kChunk> ref_f;
  alignas(64) std::array<std::int64_t, kChunk> ulps;
  Ints lane_index;
  for (int i = 0; i < kLanes; ++i) lane_index[i] = i;
  for (std::int64_t i0 = 0; i0 < c.elements; i0 += kChunk) {
    const std::int64_t n = std::min(kChunk, c.elements - i0);
    const double* r_chunk = ref.data() + i0;
    const float* o_chunk = out.data() + i0;
    for (std::int64_t k = 0; k < n; ++k) ref_f[k] = static_cast<float>(r_chunk[k]);
    ulp_distances(dtype, o_chunk, ref_f.data(), static_cast<std::size_t>(n), ulps.data());
    std::int64_t k = 0;
    if (all_finite(o_chunk, n)) {  // the common case, in fewer operations
      k = add_groups<true>(lanes, o_chunk, r_chunk, ulps.data(), k, n, i0, c.rel_floor, threshold);
      finite_elements += k;
    }
    k = add_groups<false>(lanes, o_chunk, r_chunk, ulps.data(), k, n, i0, c.rel_floor, threshold);
    if (const std::int64_t m = n - k; m > 0) {  // the tail, in lanes 0 .. m-1
      Floats o{};
      Doubles r{};
      Ints u{};
      for (std::int64_t j = 0; j < m; ++j) {
        o[j] = o_chunk[k + j];
        r[j] = r_chunk[k + j];
        u[j] = ulps[k + j];
      }
      lanes.add<false>(o, r, u, lane_index + broadcast<Ints>(i0 + k), lane_index < broadcast<Ints>(m), c.rel_floor, threshold);
    }
  }
  c.max_rel = lane_max(lanes.max_rel);
  c.out_max_abs = lane_max(lanes.out_max_abs);
  c.max_ulp = lane_max(lanes.max_ulp);
  c.over_threshold = lane_total(lanes.over);
  c.nan_count = lane_total(lanes.nan);
  c.inf_count = lane_total(lanes.nonfinite) - c.nan_count;
  const std::int64_t first_nonfinite = lane_max(-lanes.first_nonfinite);  // the smallest index
  c.first_nonfinite = first_nonfinite == -std::numeric_limits<std::int64_t>::max() ? -1 : -first_nonfinite;
  for (int i = 0; i < kLanes; ++i) {
    if (lanes.worst[i] < 0) continue;
    const double e = lanes.max_abs[i];
    if (c.worst_index < 0 || e > c.max_abs || (e == c.max_abs && lanes.worst[i] < c.worst_index)) {
      c.max_abs = e;
      c.worst_index = lanes.worst[i];
    }
  }
  const std::int64_t finite = lane_total(lanes.finite) + finite_elements;
  const double sum_sq = lane_sum(lanes.sum_sq), ref_sq = lane_sum(lanes.ref_sq), out_sq = lane_sum(lanes.out_sq);
  if (finite > 0) {
    c.mean_abs = lane_sum(lanes.sum_abs) / finite;
    c.rms = std::sqrt(sum_sq / finite);
    c.mean_ulp = static_cast<double>(lane_total(lanes.sum_ulp)) / finite;
  }
  c.rel_l2 = ref_sq > 0 ? std::sqrt(sum_sq / ref_sq) : 0;
  c.nmse = ref_sq > 0 ? sum_sq / ref_sq : 0;
  c.cosine = ref_sq > 0 && out_sq > 0 ? lane_sum(lanes.dot) / std::sqrt(ref_sq * out_sq) : 0;
  return c;
}

ErrorNorms error_norms(std::span<const float> out, std::span<const double> ref, std::span<const ElementRange> ranges) {
  Doubles max_abs{}, sum_sq{}, ref_sq{};
  Ints lane_index;
  for (int i = 0; i < kLanes; ++i) lane_index[i] = i;
  auto add = [&](Floats of, Doubles r, Ints valid) {
    const FiniteLanes f = finite_lanes(of, r, valid);
    const Doubles e = f.error, rm = f.ref;
    max_abs = e > max_abs ? e : max_abs;
    sum_sq += e * e;
    ref_sq += rm * rm;
  };
  for (const ElementRange& range : ranges) {
    std::int64_t i = range.first;
    for (; i + kLanes <= range.last; i += kLanes) {
      Floats o;
      Doubles r;
      std::memcpy(&o, &out[i], sizeof o);
      std::memcpy(&r, &ref[i], sizeof r);
      add(o, r, broadcast<Ints>(std::int64_t{-1}));
    }
    if (const std::int64_t m = range.last - i; m > 0) {
      Floats o{};
      Doubles r{};
      for (std::int64_t j = 0; j < m; ++j) {
        o[j] = out[i + j];
        r[j] = ref[i + j];
      }
      add(o, r, lane_index < broadcast<Ints>(m));
    }
  }
  ErrorNorms n;
  n.max_abs = lane_max(max_abs);
  const double sq = lane_sum(sum_sq), ref_norm_sq = lane_sum(ref_sq);
  n.rel_l2 = ref_norm_sq > 0 ? std::sqrt(sq / ref_norm_sq) : 0;
  n.nmse = ref_norm_sq > 0 ? sq / ref_norm_sq : 0;
  return n;
}

}  // namespace swa::harness
