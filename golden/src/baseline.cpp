#include "swa/baseline.hpp"

#include <algorithm>
#include <cmath>

namespace swa::baseline {

std::vector<float> attention(const AttnParams& p) {
  validate(p);
  const std::int64_t n = total_tokens(p);
  const int D = p.head_size;
  const DType dt = p.dtype;
  std::vector<float> out(static_cast<std::size_t>(n) * p.heads_q * D, 0.f);
  const auto* qb = static_cast<const unsigned char*>(p.q);
  const auto* kb = static_cast<const unsigned char*>(p.k);
  const auto* vb = static_cast<const unsigned char*>(p.v);
  const std::size_t elem = dtype_bytes(dt);
  const std::int64_t units = static_cast<std::int64_t>(p.batch) * p.heads_q;
#pragma omp parallel
  {
    std::vector<float> q(D), scores, acc(D);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t unit = 0; unit < units; ++unit) {
      const int b = static_cast<int>(unit / p.heads_q);
      const int h = static_cast<int>(unit % p.heads_q);
      const int kvh = kv_head_for(h, p.heads_q, p.heads_kv);
      const std::int64_t row0 = p.seq_offsets[b];
      const std::int64_t len = p.seq_lens[b];
      auto k_at = [&](std::int64_t j, int d) {
        return load_from(dt, kb + ((row0 + j) * p.k_row_stride + kvh * p.k_head_stride + d) * elem);
      };
      auto v_at = [&](std::int64_t j, int d) {
        return load_from(dt, vb + ((row0 + j) * p.v_row_stride + kvh * p.v_head_stride + d) * elem);
      };
      for (std::int64_t i = 0; i < len; ++i) {
        for (int d = 0; d < D; ++d)
          q[d] = round_to(dt, load_from(dt, qb + ((row0 + i) * p.q_row_stride + h * p.q_head_stride + d) * elem) *
                                  p.scale);
        const std::int64_t first = band_first_key(p.band, i), end = band_end_key(p.band, i, len);
        float* o = &out[(static_cast<std::size_t>(row0 + i) * p.heads_q + h) * D];
        if (first >= end) continue;  // no visible key: 0
        scores.resize(static_cast<std::size_t>(end - first));
        for (std::int64_t j = first; j < end; ++j) {
          float s = 0.f;
          for (int d = 0; d < D; ++d) s += q[d] * k_at(j, d);
          scores[j - first] = round_to(dt, s);
        }
        const float m = *std::max_element(scores.begin(), scores.end());
        float sum = 0.f;
        for (float& s : scores) {
          s = std::exp(s - m);
          sum += s;
        }
        for (float& s : scores) s = round_to(dt, s / sum);
        std::fill(acc.begin(), acc.end(), 0.f);
        for (std::int64_t j = first; j < end; ++j) {
          const float pj = scores[j - first];
          for (int d = 0; d < D; ++d) acc[d] += pj * v_at(j, d);
        }
        for (int d = 0; d < D; ++d) o[d] = round_to(dt, acc[d]);
      }
    }
  }
  return out;
}

}  // namespace swa::baseline
