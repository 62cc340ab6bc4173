#pragma once
#include <cstdint>
#include <vector>

#include "swa/params.hpp"
#include "swa/ring_slots.hpp"

namespace swa {

// The KV cache of one sequence (all its kv heads), in fp64: a rotating ring of `window` slots
// (modulo or compact slot policy) or a linear cache of `max_len` slots (ATB CACHE_TYPE_NORM).
// It records which position each slot holds, so attention can mask by position.
class KvCacheModel {
 public:
  KvCacheModel(CachePolicy policy, std::int64_t window, std::int64_t max_len, int heads_kv, int head_size);

  // Writes tokens [first_pos, first_pos + count) in order. k and v point at the first token's row,
  // each token's heads being `row_stride` doubles apart and contiguous [heads_kv, head_size].
  // The first call fixes the compact ring's base; positions below it are not stored.
  void write(std::int64_t first_pos, std::int64_t count, const double* k, const double* v, std::int64_t row_stride);

  std::int64_t slots() const { return slot_count_; }
  std::int64_t position(std::int64_t slot) const { return positions_[slot]; }  // -1 = empty
  const double* key(std::int64_t slot, int head) const { return &k_[offset(slot, head)]; }
  const double* value(std::int64_t slot, int head) const { return &v_[offset(slot, head)]; }

  // Slots worth visiting for a query at q_pos: every ring slot, or only the window in a linear cache.
  std::int64_t first_slot_for(WindowBand band, std::int64_t q_pos) const;
  std::int64_t end_slot_for(WindowBand band, std::int64_t q_pos) const;

  RingGeometry geometry() const { return geometry_; }
  std::int64_t newest_position() const { return newest_; }

 private:
  std::size_t offset(std::int64_t slot, int head) const {
    return (static_cast<std::size_t>(slot) * heads_kv_ + head) * head_size_;
  }
  CachePolicy policy_;
  std::int64_t slot_count_;
  int heads_kv_;
  int head_size_;
  RingGeometry geometry_;
  bool written_ = false;
  std::int64_t newest_ = -1;
  std::vector<std::int64_t> positions_;
  std::vector<double> k_, v_;
};

// Bytes one layer's cache allocates for one sequence at `context` tokens: K and V, every kv head,
// in the storage dtype (one byte each with an FP8 KV format). A ring is fixed at `window` slots; a
// linear cache grows with the context; a paged one holds the pages its last position's window
// spans (window 0: every page), page_size positions each.
std::int64_t kv_cache_bytes(CachePolicy policy, std::int64_t window, std::int64_t context, int heads_kv,
                            int head_size, DType dtype, KvFormat kv_format = KvFormat::dtype, int page_size = 0);

}  // namespace swa
