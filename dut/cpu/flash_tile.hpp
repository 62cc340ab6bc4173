#pragma once
// The FlashAttention-style core shared by prefill, chunked prefill and decode: a block of query
// rows (all q heads of one GQA group stacked) against a contiguous block of fp32 keys, visiting
// only key tiles that intersect the window, with an online softmax in fp32.
#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "amx_bf16.hpp"
#include "visibility.hpp"

#ifndef SWA_CPU_LEVEL
#error "flash_tile.hpp belongs to the kernels built once per instruction-set level (isa_levels.hpp)"
#endif

// The level's own namespace keeps its symbols apart in profiles and debuggers too.
namespace swa::dut::cpu::inline SWA_CPU_LEVEL {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRowsView = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

// Keys at absolute positions [first_pos, first_pos + count): row i of k and v is position
// first_pos + i, `stride` floats apart.
struct KeyBlock {
  const float* k = nullptr;
  const float* v = nullptr;
  std::int64_t stride = 0;
  std::int64_t first_pos = 0;
  std::int64_t count = 0;
  // The same keys packed for the AMX bf16 tile products (bf16 storage on a CPU with AMX), or null:
  // then the products are fp32 Eigen GEMMs.
  const amx::PackedKeys* packed = nullptr;
};

// What a layer adds to plain softmax(scale q.k): a soft-cap of the scaled scores (0 = off) and
// one sink logit per query head of the group (nullptr = none). golden/README.md has the formulas.
struct ScoreRule {
  float softcap = 0.f;
  const float* group_sinks = nullptr;  // [heads of the GQA group]

  // cap * tanh(s / cap) over a tile of scaled scores, before the window hides anything.
  void cap(RowMatrix& scores) const;
};

// Running softmax state of stacked query rows: max, sum and unnormalised output.
struct SoftmaxState {
  Eigen::VectorXf max, sum;
  RowMatrix out;

  void reset(std::int64_t rows, int head_size);
  // Folds in one tile of scores (rows x cols, -inf where masked) and its value rows.
  void update(RowMatrix& scores, const ConstRowsView& values);
  // update's first half: scores become the tile's weights under the new running max, sum and out are
  // rescaled; the caller adds weights x value rows to out (decode's fused fp16/bf16 path).
  void absorb(RowMatrix& scores);
  // absorb for the bf16 tile products: the weights are rounded to bf16 and written to p as bits
  // (rows x cols, row-major: amx::weights_buffer), and the row sums take the rounded weights, so the
  // sum weighs the values exactly as the bf16 P x V product does. Where the level has AVX-512, one
  // pass over a row after its max (bf16_weights.hpp: exp, rounding, sum and packing together).
  // scores may be overwritten.
  void absorb_to_bf16(RowMatrix& scores, std::uint16_t* p);
  // Folds in another state over a disjoint set of keys (log-sum-exp merge).
  void merge(const Eigen::VectorXf& other_max, const Eigen::VectorXf& other_sum, const RowMatrix& other_out);
  // out / sum into dst (rows x head_size, contiguous); rows that saw no key get 0. With sinks, row
  // r's head is r / rows_per_head and its sink joins the sum (max first) without a value row.
  void finish(float* dst, const ScoreRule& rule = {}, std::int64_t rows_per_head = 1) const;

 private:
  // Raises row i's running max to cover a tile whose own max is tile_max; returns the shift the
  // tile's exps subtract and leaves `correction` (the factor for the row's earlier sum and output).
  float raise_max(Eigen::Index i, float tile_max, float& correction);
};

struct Workspace {
  RowMatrix scores;
  SoftmaxState state;
  amx::PackedQueries amx_queries;  // the AMX path's operands and products
  std::vector<float> amx_scores;
  amx::ValueScratch amx_values;
};

// q: `heads * rows` stacked rows (head-major) of fp32 queries at positions [q_pos0, q_pos0 + rows);
// scores are q.k times `score_scale` (1 when the queries come scaled; the AMX path takes the bf16
// queries unscaled, so they stay exact). Writes the normalised outputs, same layout, to `out`.
void attend_rows(const float* q, float score_scale, int heads, std::int64_t rows, std::int64_t q_pos0, int head_size,
                 const KeyBlock& keys, const Visibility& vis, WindowBand band, const ScoreRule& rule, int key_tile,
                 Workspace& ws, float* out);

}  // namespace swa::dut::cpu::inline SWA_CPU_LEVEL
