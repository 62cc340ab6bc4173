#include "swa/harness/metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace swa::harness {

Comparison compare(std::span<const float> out, std::span<const double> ref, DType dtype, double threshold) {
  Comparison c;
  c.elements = static_cast<std::int64_t>(out.size());
  for (double r : ref) c.ref_max_abs = std::max(c.ref_max_abs, std::abs(r));
  c.rel_floor = 1e-2 * c.ref_max_abs;
  double sum_abs = 0, sum_sq = 0, ref_sq = 0, out_sq = 0, dot = 0, sum_ulp = 0;
  std::int64_t finite = 0;
  // ULP distances go a chunk at a time through the batch conversion (ulp_distances).
  constexpr std::int64_t kChunk = 1024;
  std::array<float, kChunk> out_f, ref_f;
  std::array<std::int64_t, kChunk> ulps;
  for (std::int64_t i = 0; i < c.elements; ++i) {
    if (i % kChunk == 0) {
      const std::int64_t n = std::min(kChunk, c.elements - i);
      for (std::int64_t k = 0; k < n; ++k) {
        out_f[k] = out[i + k];
        ref_f[k] = static_cast<float>(ref[i + k]);
      }
      ulp_distances(dtype, out_f.data(), ref_f.data(), static_cast<std::size_t>(n), ulps.data());
    }
    const double o = out[i], r = ref[i];
    if (!std::isfinite(o)) {
      (std::isnan(o) ? c.nan_count : c.inf_count)++;
      if (c.first_nonfinite < 0) c.first_nonfinite = i;
      continue;
    }
    ++finite;
    const double e = std::abs(o - r);
    if (e > c.max_abs || c.worst_index < 0) {
      c.max_abs = e;
      c.worst_index = i;
    }
    c.max_rel = std::max(c.max_rel, e / std::max(std::abs(r), c.rel_floor));
    sum_abs += e;
    sum_sq += e * e;
    ref_sq += r * r;
    out_sq += o * o;
    dot += o * r;
    c.out_max_abs = std::max(c.out_max_abs, std::abs(o));
    const std::int64_t ulp = ulps[i % kChunk];
    c.max_ulp = std::max(c.max_ulp, ulp);
    sum_ulp += static_cast<double>(ulp);
    if (threshold > 0 && e > threshold) ++c.over_threshold;
  }
  if (finite > 0) {
    c.mean_abs = sum_abs / finite;
    c.rms = std::sqrt(sum_sq / finite);
    c.mean_ulp = sum_ulp / finite;
  }
  c.rel_l2 = ref_sq > 0 ? std::sqrt(sum_sq / ref_sq) : 0;
  c.nmse = ref_sq > 0 ? sum_sq / ref_sq : 0;
  c.cosine = ref_sq > 0 && out_sq > 0 ? dot / std::sqrt(ref_sq * out_sq) : 0;
  return c;
}

}  // namespace swa::harness
