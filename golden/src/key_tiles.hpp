#pragma once
// Internal: a list of keys stored for tiled scoring, and attention of a block of query rows over it.
// The dense and the scheduled golden paths both run through attend_block, so a scheduled row whose
// keys are numbered like its dense row gets the dense row's bits.
#include <cstdint>
#include <span>
#include <vector>

#include "row_softmax.hpp"

namespace swa::golden::detail {

// Keys in list order: K in tiles of kKeyTile keys, each transposed to [head_size][kKeyTile], V as
// contiguous rows [size][head_size]. Copies, so the rows' source layout (heads_kv * head_size
// apart, often a power of two that would put a tile's rows in the same L1 sets) does not matter.
class KeyTiles {
 public:
  void reset(int head_size, std::int64_t capacity);
  void append(const double* k, const double* v);
  // A key that no row's range may include (it pads the list so numbering starts where wanted).
  void append_unused();
  std::int64_t size() const { return size_; }
  const double* tile(std::int64_t t) const {
    return &k_tiles_[static_cast<std::size_t>(t) * kKeyTile * head_size_];
  }
  const double* value(std::int64_t j) const { return &v_[static_cast<std::size_t>(j) * head_size_]; }

 private:
  int head_size_ = 0;
  std::int64_t size_ = 0;
  std::vector<double> k_tiles_, v_;
};

// One query row of a block: keys [first, end) of the list, its sink logit (-inf: none), and where
// its output row and log-sum-exp go.
struct BlockRow {
  const double* q;
  std::int64_t first, end;
  double sink;
  double* out;
  double* lse;
};

struct BlockScratch {
  std::vector<double> queries;        // the rows' q, fp64 (BlockRow::q points here)
  std::vector<BlockRow> rows;
  std::vector<double> scores;         // [rows][span]
  std::vector<RowNorm> norms;
  std::vector<double> sum, err;       // [rows][head_size]
};

// Every row of s.rows against its keys, tile by tile over the union of their ranges (P.V two tiles,
// one value block, at a time): a tile's K^T, and a block's values, stay in L1 while every row takes
// them. A row's bits depend only on its keys and their list numbers: scores are per key, P.V blocks
// end at multiples of kValueBlock in list numbering, and P.V's steps (at multiples of kValueBlock)
// never split one.
void attend_block(const KeyTiles& keys, int head_size, double scale, double softcap, BlockScratch& s);

}  // namespace swa::golden::detail
