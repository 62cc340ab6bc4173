#include "swa/baseline.hpp"

#include <algorithm>
#include <cmath>

namespace swa::baseline {
namespace {

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

// Rows [0, len) of one sequence and head of a packed tensor, as contiguous floats.
void load_rows(const AttnParams& p, const void* base, std::int64_t row_stride, std::int64_t head_stride, int b,
               int head, std::vector<float>& rows) {
  const auto* bytes = static_cast<const unsigned char*>(base);
  const std::size_t elem = dtype_bytes(p.dtype);
  const std::int64_t len = p.seq_lens[b];
  rows.resize(static_cast<std::size_t>(len) * p.head_size);
  for (std::int64_t j = 0; j < len; ++j)
    for (int d = 0; d < p.head_size; ++d)
      rows[j * p.head_size + d] =
          load_from(p.dtype, bytes + ((p.seq_offsets[b] + j) * row_stride + head * head_stride + d) * elem);
}

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
    std::vector<float> q, k, v, scores, acc(D);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t unit = 0; unit < units; ++unit) {
      const int b = static_cast<int>(unit / p.heads_q);
      const int h = static_cast<int>(unit % p.heads_q);
      const int kvh = kv_head_for(h, p.heads_q, p.heads_kv);
      const std::int64_t len = p.seq_lens[b];
      load_rows(p, p.q, p.q_row_stride, p.q_head_stride, b, h, q);
      load_rows(p, p.k, p.k_row_stride, p.k_head_stride, b, kvh, k);
      load_rows(p, p.v, p.v_row_stride, p.v_head_stride, b, kvh, v);
      if (is_fp8(p.kv_format)) {  // the same quantisation as the golden's: exact in fp32 too
        for (float& x : k) x = static_cast<float>(kv_read_value(p.kv_format, p.k_descale, x));
        for (float& x : v) x = static_cast<float>(kv_read_value(p.kv_format, p.v_descale, x));
      }
      for (float& x : q) x = round_to(dt, x * p.scale);
      for (std::int64_t i = 0; i < len; ++i) {
        const std::int64_t first = band_first_key(p.band, i), end = band_end_key(p.band, i, len);
        float* o = &out[(static_cast<std::size_t>(p.seq_offsets[b] + i) * p.heads_q + h) * D];
        if (first >= end) continue;  // no visible key: 0
        scores.resize(static_cast<std::size_t>(end - first));
        for (std::int64_t j = first; j < end; ++j) scores[j - first] = round_to(dt, dot_fp32(&q[i * D], &k[j * D], D));
        if (p.softcap > 0.f)
          for (float& s : scores) s = round_to(dt, p.softcap * std::tanh(s / p.softcap));
        const float sink = p.sinks ? p.sinks[h] : -INFINITY;
        const float m = std::max(*std::max_element(scores.begin(), scores.end()), sink);
        float sum = p.sinks ? std::exp(sink - m) : 0.f;
        for (float& s : scores) {
          s = std::exp(s - m);
          sum += s;
        }
        for (float& s : scores) s = round_to(dt, s / sum);
        std::fill(acc.begin(), acc.end(), 0.f);
        for (std::int64_t j = first; j < end; ++j) {
          const float pj = scores[j - first];
          const float* vj = &v[j * D];
          for (int d = 0; d < D; ++d) acc[d] += pj * vj[d];
        }
        for (int d = 0; d < D; ++d) o[d] = round_to(dt, acc[d]);
      }
    }
  }
  return out;
}

}  // namespace swa::baseline
