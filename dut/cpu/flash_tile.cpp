#include "flash_tile.hpp"

#include <algorithm>
#include <bit>
#include <limits>

#include "bf16_weights.hpp"

namespace swa::dut::cpu::inline SWA_CPU_LEVEL {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

void SoftmaxState::reset(std::int64_t rows, int head_size) {
  max.setConstant(rows, kNegInf);
  sum.setZero(rows);
  out.setZero(rows, head_size);
}

void SoftmaxState::update(RowMatrix& scores, const ConstRowsView& values) {
  absorb(scores);
  out.noalias() += scores * values;
}

float SoftmaxState::raise_max(Eigen::Index i, float tile_max, float& correction) {
  const float new_max = std::max(max[i], tile_max);
  // A row with no visible key so far keeps max = -inf; subtracting 0 then keeps exp(-inf) = 0.
  const float shift = new_max == kNegInf ? 0.f : new_max;
  correction = max[i] == kNegInf ? 0.f : max[i] == new_max ? 1.f : std::exp(max[i] - shift);  // exp(0) = 1
  max[i] = new_max;
  return shift;
}

void SoftmaxState::absorb(RowMatrix& scores) {
  const Eigen::Index rows = scores.rows();
  Eigen::VectorXf correction(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const float shift = raise_max(i, scores.row(i).maxCoeff(), correction[i]);
    scores.row(i).array() = (scores.row(i).array() - shift).exp();
  }
  sum = sum.cwiseProduct(correction) + scores.rowwise().sum();
  // Most tiles leave a row's max where it was (correction exactly 1): those rows need no rescale.
  for (Eigen::Index i = 0; i < rows; ++i)
    if (correction[i] != 1.f) out.row(i) *= correction[i];
}

void SoftmaxState::absorb_to_bf16(RowMatrix& scores, std::uint16_t* p) {
  const Eigen::Index rows = scores.rows(), cols = scores.cols();
  for (Eigen::Index i = 0; i < rows; ++i) {
    std::uint16_t* bits = p + i * cols;
    float correction = 1.f, row_sum = 0.f;
#if defined(__AVX512F__)
    if (cols % 16 == 0) {
      const float* row = scores.row(i).data();
      const float shift = raise_max(i, bf16_weights::row_max(row, cols, kNegInf), correction);
      row_sum = bf16_weights::round_row(row, cols, shift, bits);
    } else
#endif
    {  // levels without AVX-512, which no CPU with the bf16 products runs: Eigen's exp
      const float shift = raise_max(i, scores.row(i).maxCoeff(), correction);
      Eigen::Map<Eigen::RowVectorXf> weights(scores.row(i).data(), cols);
      weights.array() = (weights.array() - shift).exp();
      amx::round_weights_to_bf16(weights.data(), cols);
      row_sum = weights.sum();
      for (Eigen::Index c = 0; c < cols; ++c) bits[c] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(weights[c]) >> 16);
    }
    sum[i] = sum[i] * correction + row_sum;
    if (correction != 1.f) out.row(i) *= correction;
  }
}

void ScoreRule::cap(RowMatrix& scores) const {
  if (softcap > 0.f) scores.array() = (scores.array() * (1.f / softcap)).tanh() * softcap;
}

void SoftmaxState::finish(float* dst, const ScoreRule& rule, std::int64_t rows_per_head) const {
  Eigen::Map<RowMatrix> result(dst, out.rows(), out.cols());
  for (Eigen::Index i = 0; i < out.rows(); ++i) {
    if (!(sum[i] > 0.f)) {
      result.row(i).setZero();
      continue;
    }
    if (!rule.group_sinks) {
      result.row(i) = out.row(i) / sum[i];
      continue;
    }
    const float sink = rule.group_sinks[i / rows_per_head];
    const float m = std::max(max[i], sink);
    const float keys_weight = std::exp(max[i] - m);
    result.row(i) = out.row(i) * (keys_weight / (sum[i] * keys_weight + std::exp(sink - m)));
  }
}

void SoftmaxState::merge(const Eigen::VectorXf& other_max, const Eigen::VectorXf& other_sum,
                         const RowMatrix& other_out) {
  for (Eigen::Index i = 0; i < max.size(); ++i) {
    const float m = std::max(max[i], other_max[i]);
    if (m == kNegInf) continue;  // neither side saw a key
    const float a = max[i] == kNegInf ? 0.f : std::exp(max[i] - m);
    const float c = other_max[i] == kNegInf ? 0.f : std::exp(other_max[i] - m);
    sum[i] = sum[i] * a + other_sum[i] * c;
    out.row(i) = out.row(i) * a + other_out.row(i) * c;
    max[i] = m;
  }
}

void attend_rows(const float* q, float score_scale, int heads, std::int64_t rows, std::int64_t q_pos0, int head_size,
                 const KeyBlock& keys, const Visibility& vis, WindowBand band, const ScoreRule& rule, int key_tile,
                 Workspace& ws, float* out) {
  const std::int64_t stacked = heads * rows;
  const Eigen::Map<const RowMatrix> queries(q, stacked, head_size);
  ws.state.reset(stacked, head_size);
  if (keys.packed) ws.amx_queries.pack(q, stacked, head_size, keys.packed->dims);
  const std::int64_t block_end = keys.first_pos + keys.count;
  const KeyRange range = band_key_range(band, q_pos0, q_pos0 + rows, keys.first_pos, block_end);
  std::int64_t first = range.first, end = range.end;
  const int tile = vis.required_tile() > 0 ? vis.required_tile() : key_tile;
  if (vis.required_tile() > 0) {  // the compressed mask is read on whole, aligned tiles
    first = std::max(keys.first_pos, first / tile * tile);
    end = std::min(block_end, (end + tile - 1) / tile * tile);
  }
  for (std::int64_t c0 = first / tile * tile; c0 < end; c0 += tile) {
    const std::int64_t cs = std::max(c0, first), ce = std::min(c0 + tile, end);
    const TileClass cls = vis.classify(q_pos0, q_pos0 + rows, cs, ce);
    if (cls == TileClass::hidden) continue;
    // Score column c is key position col0 + c. The AMX path reads whole packed blocks of 32 keys, so
    // its columns may reach past [cs, ce) on either side; those are masked below.
    std::int64_t col0 = cs, cols = ce - cs, first_block = 0, block_count = 0;
    if (keys.packed) {
      first_block = (cs - keys.first_pos) / 32;
      block_count = (ce - keys.first_pos + 31) / 32 - first_block;
      col0 = keys.first_pos + first_block * 32;
      cols = block_count * 32;
      if (ws.amx_queries.padded_rows == stacked) {  // whole tiles of rows: the products land in place
        ws.scores.resize(stacked, cols);
        amx::tile_scores(ws.amx_queries, *keys.packed, first_block, block_count, ws.scores.data());
        ws.scores *= score_scale;
      } else {
        ws.amx_scores.resize(static_cast<std::size_t>(ws.amx_queries.padded_rows * cols));
        amx::tile_scores(ws.amx_queries, *keys.packed, first_block, block_count, ws.amx_scores.data());
        ws.scores = Eigen::Map<const RowMatrix>(ws.amx_scores.data(), stacked, cols) * score_scale;
      }
    } else {
      const ConstRowsView k(keys.k + (cs - keys.first_pos) * keys.stride, cols, head_size, Eigen::OuterStride<>(keys.stride));
      ws.scores.resize(stacked, cols);
      ws.scores.noalias() = queries * k.transpose();
      if (score_scale != 1.f) ws.scores *= score_scale;
    }
    rule.cap(ws.scores);
    if (cls == TileClass::partial || col0 != cs || cols != ce - cs)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
          const std::int64_t pos = col0 + c;
          if (pos < cs || pos >= ce || (cls == TileClass::partial && !vis.visible(q_pos0 + r, pos)))
            for (int h = 0; h < heads; ++h) ws.scores(h * rows + r, c) = kNegInf;
        }
    if (keys.packed) {
      ws.state.absorb_to_bf16(ws.scores, amx::weights_buffer(ws.amx_values, stacked, cols));
      amx::add_packed_weighted_values(stacked, *keys.packed, first_block, block_count, ws.amx_values,
                                      ws.state.out.data());
    } else {
      const ConstRowsView v(keys.v + (cs - keys.first_pos) * keys.stride, cols, head_size, Eigen::OuterStride<>(keys.stride));
      ws.state.update(ws.scores, v);
    }
  }
  ws.state.finish(out, rule, rows);
}

}  // namespace swa::dut::cpu::inline SWA_CPU_LEVEL
