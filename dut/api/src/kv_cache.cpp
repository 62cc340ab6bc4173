#include "swa/dut/kv_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "swa/dut/fp8.hpp"

namespace swa::dut {

std::int64_t KvCache::position_in(int b, std::int64_t slot) const {
  const std::int64_t newest = tokens_written[b] - 1;
  if (newest < 0) return -1;
  if (paged()) return slot <= newest && page_of(b, slot) >= 0 ? slot : -1;
  if (policy == CachePolicy::linear) return slot <= newest ? slot : -1;
  return ring_slot_position(geometry[b], slot, newest);
}

void free_pages_below(KvCache& cache, int b, std::int64_t dead_pages) {
  std::int32_t* row = &cache.page_table[b * cache.table_width];
  for (std::int64_t j = 0; j < std::min(dead_pages, cache.table_width); ++j)
    if (row[j] >= 0) cache.free_pages.push_back(std::exchange(row[j], -1));
}

void take_pages(KvCache& cache, int b, std::int64_t from, std::int64_t e) {
  for (std::int64_t j = from / cache.page_size; j * cache.page_size < e; ++j) {
    std::int32_t& page = cache.page_table[b * cache.table_width + j];
    if (page >= 0) continue;
    if (cache.free_pages.empty())
      throw std::runtime_error("paged KV cache: the pool of " + std::to_string(cache.pages) + " pages is exhausted");
    page = cache.free_pages.back();
    cache.free_pages.pop_back();
  }
}

namespace {
// Rows [s, e) sequence b writes in the call, and the first query that reads the cache after them.
struct CallRows {
  std::int64_t s, e, next_reader;
};
CallRows call_rows(const AttnParams& p, int b, RunMode call, int index) {
  if (call == RunMode::decode) {
    const std::int64_t i = prompt_len(p, b) + index;
    return {i, i + 1, i};
  }
  const std::int64_t e = chunk_end(p, b, index);
  return {chunk_begin(p, b, index), e, e};
}
}  // namespace

void take_call_pages(const AttnParams& p, KvCache& cache, RunMode call, int index) {
  if (!cache.paged()) return;
  for (int b = 0; b < p.batch; ++b) {
    const CallRows r = call_rows(p, b, call, index);
    if (r.s < r.e) take_pages(cache, b, first_stored_row(cache.band, r.s, r.next_reader, cache.page_size), r.e);
  }
}

void free_call_pages(const AttnParams& p, KvCache& cache, RunMode call, int index) {
  if (!cache.paged()) return;
  for (int b = 0; b < p.batch; ++b) {
    const CallRows r = call_rows(p, b, call, index);
    if (r.s < r.e) free_pages_below(cache, b, pages_dead_before(cache.band, r.e, cache.page_size));
  }
}

bool stores_position(const KvCache& cache, int b, std::int64_t pos) {
  return cache.paged() ? cache.page_of(b, pos) >= 0 : pos >= cache.geometry[b].base;
}

void advance_cache_metadata(KvCache& cache, int b, std::int64_t s, std::int64_t e) {
  if (cache.tokens_written[b] == 0 && cache.policy == CachePolicy::ring_compact)
    cache.geometry[b].base = compact_ring_base(e - s, cache.slots);
  cache.tokens_written[b] = e;
}

void write_rows_to_cache(const AttnParams& p, KvCache& cache, int b, std::int64_t s, std::int64_t e) {
  advance_cache_metadata(cache, b, s, e);
  const std::size_t elem = dtype_bytes(p.dtype);
  const std::size_t bytes = static_cast<std::size_t>(p.head_size) * elem;
  const auto* k = static_cast<const unsigned char*>(p.k);
  const auto* v = static_cast<const unsigned char*>(p.v);
  const bool fp8 = is_fp8(cache.format), e4m3 = is_e4m3(cache.format);
  auto put = [&](const unsigned char* src, float descale, unsigned char* dst) {
    if (!fp8) return static_cast<void>(std::copy_n(src, bytes, dst));
    for (int d = 0; d < p.head_size; ++d) dst[d] = fp8_from_float(load_from(p.dtype, src + d * elem) / descale, e4m3);
  };
  for (std::int64_t pos = s; pos < e; ++pos) {
    if (!stores_position(cache, b, pos)) continue;
    const std::int64_t slot = cache.slot_of(b, pos);
    const std::int64_t row = p.seq_offsets[b] + pos;
    for (int g = 0; g < p.heads_kv; ++g) {
      put(k + (row * p.k_row_stride + g * p.k_head_stride) * elem, p.k_descale, &cache.k[cache.offset(b, slot, g)]);
      put(v + (row * p.v_row_stride + g * p.v_head_stride) * elem, p.v_descale, &cache.v[cache.offset(b, slot, g)]);
    }
  }
}

KvCache kv_cache_layout(const AttnParams& p) {
  KvCache c;
  c.policy = p.cache;
  c.dtype = p.dtype;
  c.format = p.kv_format;
  c.heads_kv = p.heads_kv;
  c.head_size = p.head_size;
  std::int64_t longest = 0;
  for (int b = 0; b < p.batch; ++b) longest = std::max<std::int64_t>(longest, p.seq_lens[b]);
  c.slots = p.cache == CachePolicy::linear ? longest : p.band.left + 1;
  if (c.paged()) {
    c.page_size = p.page_size;
    c.pages = p.pool_pages;
    c.table_width = logical_pages(longest, p.page_size);
    c.slots = c.table_width * p.page_size;
    c.band = p.band;
    c.page_table.assign(static_cast<std::size_t>(p.batch) * c.table_width, -1);
    c.free_pages.assign(p.page_order, p.page_order + p.pool_pages);
    std::reverse(c.free_pages.begin(), c.free_pages.end());
  }
  c.geometry.assign(p.batch, RingGeometry{c.slots, 0});
  c.tokens_written.assign(p.batch, 0);
  return c;
}

std::size_t kv_cache_storage_slots(const KvCache& c) {
  return c.paged() ? static_cast<std::size_t>(c.pages) * c.page_size
                   : static_cast<std::size_t>(c.geometry.size()) * c.slots;
}

KvCache make_kv_cache(const AttnParams& p) {
  KvCache c = kv_cache_layout(p);
  c.k.assign(kv_cache_storage_slots(c) * c.heads_kv * c.head_size * c.element_bytes(), 0);
  c.v.assign(c.k.size(), 0);
  return c;
}

std::int64_t chunk_begin(const AttnParams& p, int b, int chunk_index) {
  const std::int64_t prompt = prompt_len(p, b);
  const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
  return std::min(prompt, chunk_index * chunk);
}

std::int64_t chunk_end(const AttnParams& p, int b, int chunk_index) {
  const std::int64_t prompt = prompt_len(p, b);
  const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
  return std::min(prompt, (chunk_index + 1) * chunk);
}

int chunk_count(const AttnParams& p) {
  int count = 0;
  for (int b = 0; b < p.batch; ++b) {
    const std::int64_t prompt = prompt_len(p, b);
    const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
    count = std::max<int>(count, static_cast<int>((prompt + chunk - 1) / chunk));
  }
  return count;
}

}  // namespace swa::dut
