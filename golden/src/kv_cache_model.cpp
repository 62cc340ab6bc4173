#include "swa/kv_cache_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace swa {

KvCacheModel::KvCacheModel(CachePolicy policy, std::int64_t window, std::int64_t max_len, int heads_kv,
                           int head_size)
    : policy_(policy),
      slot_count_(policy == CachePolicy::linear ? max_len : window),
      heads_kv_(heads_kv),
      head_size_(head_size) {
  if (slot_count_ < 1)
    throw std::invalid_argument("KV cache needs >= 1 slot (window or max_len), got " + std::to_string(slot_count_));
  geometry_.capacity = slot_count_;
  positions_.assign(static_cast<std::size_t>(slot_count_), -1);
  k_.assign(static_cast<std::size_t>(slot_count_) * heads_kv * head_size, 0.0);
  v_.assign(k_.size(), 0.0);
}

void KvCacheModel::write(std::int64_t first_pos, std::int64_t count, const double* k, const double* v,
                         std::int64_t row_stride) {
  if (first_pos != newest_ + 1)
    throw std::logic_error("KV cache written out of order: expected position " + std::to_string(newest_ + 1) +
                           ", got " + std::to_string(first_pos));
  if (!written_ && policy_ == CachePolicy::ring_compact) geometry_.base = compact_ring_base(count, slot_count_);
  written_ = true;
  const std::size_t token_elems = static_cast<std::size_t>(heads_kv_) * head_size_;
  for (std::int64_t t = 0; t < count; ++t) {
    const std::int64_t pos = first_pos + t;
    if (pos < geometry_.base) continue;
    if (policy_ == CachePolicy::linear && pos >= slot_count_)
      throw std::out_of_range("linear KV cache of " + std::to_string(slot_count_) + " slots cannot hold position " +
                              std::to_string(pos));
    const std::int64_t slot = policy_ == CachePolicy::linear ? pos : ring_slot(geometry_, pos);
    positions_[slot] = pos;
    std::copy_n(k + t * row_stride, token_elems, &k_[offset(slot, 0)]);
    std::copy_n(v + t * row_stride, token_elems, &v_[offset(slot, 0)]);
  }
  newest_ = first_pos + count - 1;
}

std::int64_t KvCacheModel::first_slot_for(WindowBand band, std::int64_t q_pos) const {
  return policy_ == CachePolicy::linear ? std::min(band_first_key(band, q_pos), slot_count_) : 0;
}

std::int64_t KvCacheModel::end_slot_for(WindowBand band, std::int64_t q_pos) const {
  return policy_ == CachePolicy::linear ? band_end_key(band, q_pos, std::min(newest_ + 1, slot_count_)) : slot_count_;
}

std::int64_t kv_cache_bytes(CachePolicy policy, std::int64_t window, std::int64_t context, int heads_kv,
                            int head_size, DType dtype, KvFormat kv_format, int page_size) {
  std::int64_t slots = policy == CachePolicy::linear ? context : window;
  if (policy == CachePolicy::paged) {
    if (page_size < 1) throw std::invalid_argument("kv_cache_bytes: a paged cache needs page_size >= 1");
    const std::int64_t last = context - 1, first = window > 0 ? std::max<std::int64_t>(0, last - window + 1) : 0;
    slots = (last / page_size - first / page_size + 1) * page_size;
  }
  return 2 * slots * heads_kv * head_size * static_cast<std::int64_t>(kv_element_bytes(kv_format, dtype));
}

}  // namespace swa
