#pragma once
#include <cstdint>
#include <vector>

#include "swa/paging.hpp"
#include "swa/params.hpp"

namespace swa {

// The paged KV cache of a whole batch, in fp64 (golden/README.md, "Paged KV cache"): a pool of
// pages shared by the sequences, a page table per sequence, and the pool's free pages as a stack
// (the most recently freed on top, never-used pages below in page_order). Never-written pool
// entries hold NaN, so a read of one could not pass unseen; freed pages keep their old contents,
// as a serving stack's would.
class PagedKvModel {
 public:
  explicit PagedKvModel(const AttnParams& p);

  // One call's bookkeeping for sequence b, which writes rows [s, e) (paging.hpp): take pages before
  // the call, store the rows, free the dead pages after it. Rows are stored in order after the
  // earlier ones, from first_stored_row on; k and v point at row s as in KvCacheModel::write.
  void take(int b, std::int64_t s, std::int64_t e, std::int64_t next_reader);
  void store(int b, std::int64_t s, std::int64_t e, const double* k, const double* v, std::int64_t row_stride);
  void release(int b, std::int64_t e);

  int page_size() const { return page_size_; }
  std::int64_t pool_pages() const { return pool_pages_; }
  std::int64_t table_width() const { return table_width_; }  // logical pages per sequence
  std::int32_t physical_page(int b, std::int64_t logical) const { return table_[b * table_width_ + logical]; }
  std::int64_t tokens_written(int b) const { return tokens_written_[b]; }
  // Whether position pos of sequence b is written and its page held.
  bool holds(int b, std::int64_t pos) const;
  // K and V of a held position, read through the page table; std::logic_error otherwise.
  const double* key(int b, std::int64_t pos, int head) const;
  const double* value(int b, std::int64_t pos, int head) const;
  // Takes of a page that an earlier sequence or position had held: how much recycling happened.
  std::int64_t recycled_takes() const { return recycled_takes_; }

 private:
  std::size_t offset(int b, std::int64_t pos, int head) const;
  int page_size_;
  std::int64_t pool_pages_, table_width_;
  int heads_kv_, head_size_;
  WindowBand band_;
  std::vector<std::int32_t> table_;       // [batch, table_width], -1 = not held
  std::vector<std::int32_t> free_;        // top = back
  std::vector<bool> used_;                // [pool_pages]: held at some time
  std::vector<std::int64_t> tokens_written_;
  std::vector<double> k_, v_;             // [pool_pages, page_size, heads_kv, head_size]
  std::int64_t recycled_takes_ = 0;
};

// One sequence of a PagedKvModel with KvCacheModel's read interface; a slot is a position.
class PagedSequenceView {
 public:
  PagedSequenceView(const PagedKvModel& model, int b) : m_(model), b_(b) {}
  std::int64_t first_slot_for(WindowBand band, std::int64_t q_pos) const { return band_first_key(band, q_pos); }
  std::int64_t end_slot_for(WindowBand band, std::int64_t q_pos) const {
    return band_end_key(band, q_pos, m_.tokens_written(b_));
  }
  std::int64_t position(std::int64_t slot) const { return m_.holds(b_, slot) ? slot : -1; }
  const double* key(std::int64_t slot, int head) const { return m_.key(b_, slot, head); }
  const double* value(std::int64_t slot, int head) const { return m_.value(b_, slot, head); }

 private:
  const PagedKvModel& m_;
  int b_;
};

}  // namespace swa
