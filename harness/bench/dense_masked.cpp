#include "dense_masked.hpp"

#include <Eigen/Core>
#include <limits>

namespace swa::bench {

void dense_masked_attention(const AttnParams& p) {
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Rows = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
  const int d = p.head_size;
  RowMatrix scores, out;
  for (int b = 0; b < p.batch; ++b) {
    const std::int64_t n = p.seq_lens[b], row0 = p.seq_offsets[b];
    for (int h = 0; h < p.heads_q; ++h) {
      const int g = kv_head_for(h, p.heads_q, p.heads_kv);
      const Rows q(static_cast<const float*>(p.q) + row0 * p.q_row_stride + h * p.q_head_stride, n, d,
                   Eigen::OuterStride<>(p.q_row_stride));
      const Rows k(static_cast<const float*>(p.k) + row0 * p.k_row_stride + g * p.k_head_stride, n, d,
                   Eigen::OuterStride<>(p.k_row_stride));
      const Rows v(static_cast<const float*>(p.v) + row0 * p.v_row_stride + g * p.v_head_stride, n, d,
                   Eigen::OuterStride<>(p.v_row_stride));
      scores.noalias() = (q * k.transpose()) * p.scale;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          if (!band_visible(p.band, i, j)) scores(i, j) = -std::numeric_limits<float>::infinity();
      for (std::int64_t i = 0; i < n; ++i) {
        auto row = scores.row(i).array();
        row = (row - row.maxCoeff()).exp();
        row /= row.sum();
      }
      out.noalias() = scores * v;
      Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>(static_cast<float*>(p.out) + row0 * p.out_row_stride +
                                                         h * p.out_head_stride,
                                                     n, d, Eigen::OuterStride<>(p.out_row_stride)) = out;
    }
  }
}

}  // namespace swa::bench
