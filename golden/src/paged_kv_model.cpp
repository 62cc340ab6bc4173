#include "swa/paged_kv_model.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace swa {

PagedKvModel::PagedKvModel(const AttnParams& p)
    : page_size_(p.page_size),
      pool_pages_(p.pool_pages),
      heads_kv_(p.heads_kv),
      head_size_(p.head_size),
      band_(p.band) {
  validate_paging(p);
  std::int64_t longest = 0;
  for (int b = 0; b < p.batch; ++b) longest = std::max<std::int64_t>(longest, p.seq_lens[b]);
  table_width_ = logical_pages(longest, page_size_);
  table_.assign(static_cast<std::size_t>(p.batch) * table_width_, -1);
  free_.assign(p.page_order, p.page_order + pool_pages_);
  std::reverse(free_.begin(), free_.end());
  used_.assign(static_cast<std::size_t>(pool_pages_), false);
  tokens_written_.assign(p.batch, 0);
  k_.assign(static_cast<std::size_t>(pool_pages_) * page_size_ * heads_kv_ * head_size_,
            std::numeric_limits<double>::quiet_NaN());
  v_ = k_;
}

void PagedKvModel::take(int b, std::int64_t s, std::int64_t e, std::int64_t next_reader) {
  std::int32_t* row = &table_[b * table_width_];
  for (std::int64_t j = first_stored_row(band_, s, next_reader, page_size_) / page_size_; j * page_size_ < e; ++j) {
    if (row[j] >= 0) continue;
    if (free_.empty())
      throw std::logic_error("paged KV cache: the pool of " + std::to_string(pool_pages_) + " pages is exhausted");
    row[j] = free_.back();
    free_.pop_back();
    recycled_takes_ += used_[row[j]] ? 1 : 0;
    used_[row[j]] = true;
  }
}

void PagedKvModel::store(int b, std::int64_t s, std::int64_t e, const double* k, const double* v,
                         std::int64_t row_stride) {
  if (s != tokens_written_[b])
    throw std::logic_error("paged KV cache written out of order: expected position " +
                           std::to_string(tokens_written_[b]) + ", got " + std::to_string(s));
  const std::size_t token_elems = static_cast<std::size_t>(heads_kv_) * head_size_;
  for (std::int64_t pos = s; pos < e; ++pos) {
    if (physical_page(b, pos / page_size_) < 0) continue;  // below first_stored_row: not stored
    std::copy_n(k + (pos - s) * row_stride, token_elems, &k_[offset(b, pos, 0)]);
    std::copy_n(v + (pos - s) * row_stride, token_elems, &v_[offset(b, pos, 0)]);
  }
  tokens_written_[b] = e;
}

void PagedKvModel::release(int b, std::int64_t e) {
  std::int32_t* row = &table_[b * table_width_];
  for (std::int64_t j = 0; j < std::min(pages_dead_before(band_, e, page_size_), table_width_); ++j)
    if (row[j] >= 0) free_.push_back(std::exchange(row[j], -1));
}

bool PagedKvModel::holds(int b, std::int64_t pos) const {
  return pos >= 0 && pos < tokens_written_[b] && physical_page(b, pos / page_size_) >= 0;
}

std::size_t PagedKvModel::offset(int b, std::int64_t pos, int head) const {
  const std::int64_t page = physical_page(b, pos / page_size_);
  return ((static_cast<std::size_t>(page) * page_size_ + pos % page_size_) * heads_kv_ + head) * head_size_;
}

const double* PagedKvModel::key(int b, std::int64_t pos, int head) const {
  if (!holds(b, pos))
    throw std::logic_error("paged KV cache: position " + std::to_string(pos) + " of sequence " + std::to_string(b) +
                           " is not held");
  return &k_[offset(b, pos, head)];
}

const double* PagedKvModel::value(int b, std::int64_t pos, int head) const {
  return &v_[key(b, pos, head) - k_.data()];
}

}  // namespace swa
