#include "key_tiles.hpp"

#include <algorithm>
#include <limits>

namespace swa::golden::detail {

void KeyTiles::reset(int head_size, std::int64_t capacity) {
  head_size_ = head_size;
  size_ = 0;
  k_tiles_.clear();
  v_.clear();
  const std::int64_t tiles = (capacity + kKeyTile - 1) / kKeyTile;
  k_tiles_.reserve(static_cast<std::size_t>(tiles * kKeyTile) * head_size);
  v_.reserve(static_cast<std::size_t>(capacity) * head_size);
}

void KeyTiles::append(const double* k, const double* v) {
  if (size_ % kKeyTile == 0) k_tiles_.resize(k_tiles_.size() + static_cast<std::size_t>(kKeyTile) * head_size_, 0.0);
  double* tile = &k_tiles_[static_cast<std::size_t>(size_ / kKeyTile) * kKeyTile * head_size_];
  for (int d = 0; d < head_size_; ++d) tile[d * kKeyTile + size_ % kKeyTile] = k[d];
  v_.insert(v_.end(), v, v + head_size_);
  ++size_;
}

void KeyTiles::append_unused() {
  if (size_ % kKeyTile == 0) k_tiles_.resize(k_tiles_.size() + static_cast<std::size_t>(kKeyTile) * head_size_, 0.0);
  v_.resize(v_.size() + head_size_, std::numeric_limits<double>::quiet_NaN());
  ++size_;
}

void attend_block(const KeyTiles& keys, int head_size, double scale, double softcap, BlockScratch& s) {
  const int d = head_size;
  const std::int64_t n = static_cast<std::int64_t>(s.rows.size());
  std::int64_t lo = keys.size(), hi = 0;
  for (const BlockRow& row : s.rows)
    if (row.end > row.first) {
      lo = std::min(lo, row.first);
      hi = std::max(hi, row.end);
    }
  const std::int64_t base = lo < hi ? lo - lo % kKeyTile : 0;
  const std::int64_t span = std::max<std::int64_t>(0, hi - base);
  s.scores.resize(static_cast<std::size_t>(n * span));
  for (std::int64_t t0 = base; t0 < hi; t0 += kKeyTile)
    for (std::int64_t r = 0; r < n; ++r) {
      const BlockRow& row = s.rows[r];
      const std::int64_t f = std::max(t0, row.first), e = std::min(t0 + kKeyTile, row.end);
      if (e <= f) continue;
      scores_in_tile(row.q, keys.tile(t0 / kKeyTile), static_cast<int>(f - t0), static_cast<int>(e - f), d, scale,
                     &s.scores[r * span + (f - base)]);
    }
  s.norms.resize(n);
  for (std::int64_t r = 0; r < n; ++r) {
    const BlockRow& row = s.rows[r];
    const std::int64_t count = std::max<std::int64_t>(0, row.end - row.first);
    double* scores = count > 0 ? &s.scores[r * span + (row.first - base)] : nullptr;
    soft_cap(scores, count, softcap);
    s.norms[r] = exponentiate(scores, count, row.sink);
  }
  s.sum.assign(static_cast<std::size_t>(n) * d, 0.0);
  s.err.assign(s.sum.size(), 0.0);
  for (std::int64_t t0 = base - base % kValueBlock; t0 < hi; t0 += kValueBlock)
    for (std::int64_t r = 0; r < n; ++r) {
      const BlockRow& row = s.rows[r];
      const std::int64_t f = std::max(t0, row.first), e = std::min(t0 + kValueBlock, row.end);
      if (e <= f) continue;
      accumulate_values(&s.scores[r * span + (f - base)], keys.value(f), f, e - f, d, &s.sum[r * d],
                        &s.err[r * d]);
    }
  for (std::int64_t r = 0; r < n; ++r) {
    const BlockRow& row = s.rows[r];
    *row.lse = finish_row(s.norms[r], &s.sum[r * d], &s.err[r * d], d, row.out).lse;
  }
}

}  // namespace swa::golden::detail
