#pragma once
// The KV cache a DUT reads and writes during chunked prefill and decode, in host memory with an
// explicit layout, so every backend (and an external one) sees the same thing.
#include <cstdint>
#include <vector>

#include "swa/paging.hpp"
#include "swa/params.hpp"
#include "swa/ring_slots.hpp"

namespace swa::dut {

// K and V are [batch, slots, heads_kv, head_size] in the run's dtype, or FP8 codes (one byte each)
// when `format` is FP8 (descales: AttnParams::k_descale, v_descale). A ring has `window` slots
// (slot of position p: ring_slot(geometry[b], p)); a linear cache has max_len slots (slot = p).
// geometry[b].base of a compact ring is fixed by the sequence's first write (compact_ring_base).
// tokens_written[b] counts positions [0, tokens_written[b]) already written for sequence b.
//
// Paged (golden/README.md, "Paged KV cache"; rules in swa/paging.hpp): K and V are a pool
// [pages, page_size, heads_kv, head_size] shared by the batch; page_table [batch, table_width] maps
// sequence b's logical page p / page_size to a physical page (-1: not held); free_pages is the pool's
// free stack (back = taken next). A slot is a position (slots = table_width * page_size); a run of
// slots is contiguous only within a page (contiguous_slots).
struct KvCache {
  CachePolicy policy = CachePolicy::ring_modulo;
  DType dtype = DType::fp32;
  KvFormat format = KvFormat::dtype;
  std::int64_t slots = 0;
  int heads_kv = 0;
  int head_size = 0;
  std::vector<RingGeometry> geometry;
  std::vector<std::int64_t> tokens_written;
  std::vector<unsigned char> k, v;

  // Paged only.
  int page_size = 0;
  std::int64_t pages = 0, table_width = 0;
  WindowBand band;  // frees pages (pages_dead_before)
  std::vector<std::int32_t> page_table, free_pages;

  bool paged() const { return policy == CachePolicy::paged; }
  std::size_t element_bytes() const { return kv_element_bytes(format, dtype); }
  std::int32_t& page_of(int b, std::int64_t slot) { return page_table[b * table_width + slot / page_size]; }
  std::int32_t page_of(int b, std::int64_t slot) const { return page_table[b * table_width + slot / page_size]; }
  // Byte offset of (slot, head) of sequence b; for a paged cache the slot's page must be held.
  std::size_t offset(int b, std::int64_t slot, int head) const {
    if (paged())
      return ((static_cast<std::size_t>(page_of(b, slot)) * page_size + slot % page_size) * heads_kv + head) *
             head_size * element_bytes();
    return ((static_cast<std::size_t>(b) * slots + slot) * heads_kv + head) * head_size * element_bytes();
  }
  std::int64_t slot_of(int b, std::int64_t pos) const {
    return policy == CachePolicy::linear || paged() ? pos : ring_slot(geometry[b], pos);
  }
  // Slots from `slot` on that lie contiguously in memory (heads_kv * head_size elements apart).
  std::int64_t contiguous_slots(std::int64_t slot) const {
    return paged() ? page_size - slot % page_size : slots - slot;
  }
  // Position held by `slot` of sequence b, or -1 when never written.
  std::int64_t position_in(int b, std::int64_t slot) const;
};

// The bookkeeping of writing sequence rows [s, e) without the copy (a device DUT copies on the device
// and downloads): the first write fixes a compact ring's base; tokens_written becomes e. A paged
// cache's pages are taken and freed around the call by run_schedule, not here.
void advance_cache_metadata(KvCache& cache, int b, std::int64_t s, std::int64_t e);

// Paged bookkeeping (swa/paging.hpp): sequence b takes pages for rows [from, e) it has none for, from
// the free stack (std::runtime_error when the pool is exhausted); frees its held pages below logical
// page `dead_pages` onto the stack, lowest first.
void take_pages(KvCache& cache, int b, std::int64_t from, std::int64_t e);
void free_pages_below(KvCache& cache, int b, std::int64_t dead_pages);

// What run_schedule does around each call with a paged cache, every sequence in batch order (no-ops
// otherwise): before chunk `index` (chunked_prefill) or decode step `index` (decode), take the pages
// of the rows each sequence writes; after it, free the pages dead to the next query.
void take_call_pages(const AttnParams& p, KvCache& cache, RunMode call, int index);
void free_call_pages(const AttnParams& p, KvCache& cache, RunMode call, int index);

// Whether a write stores position pos of sequence b: not below a compact ring's base, and in a paged
// cache only when its page is held (rows in pages not taken are dead to every later query).
bool stores_position(const KvCache& cache, int b, std::int64_t pos);

// Host copy of sequence rows [s, e) of p.k/p.v into the cache (FP8: quantised, fp8.hpp), in order (later positions overwrite
// earlier ones in a ring), after advance_cache_metadata; positions it does not store (stores_position) are skipped.
void write_rows_to_cache(const AttnParams& p, KvCache& cache, int b, std::int64_t s, std::int64_t e);

// Window slots for a ring (band.left + 1), the longest sequence for a linear cache, a pool of
// p.pool_pages pages for a paged cache (free stack from p.page_order).
KvCache make_kv_cache(const AttnParams& p);
// The same cache's shape and bookkeeping without its K/V storage (k and v empty), for its sizes and
// page tables; kv_cache_storage_slots: the slots make_kv_cache allocates (batch x slots, or pages x
// page_size), each heads_kv x head_size elements for K and again for V.
KvCache kv_cache_layout(const AttnParams& p);
std::size_t kv_cache_storage_slots(const KvCache& c);

// The rows of sequence b's chunk c: [c * chunk, min((c + 1) * chunk, prompt)), chunk = whole prompt
// when p.chunk == 0.
std::int64_t chunk_begin(const AttnParams& p, int b, int chunk_index);
std::int64_t chunk_end(const AttnParams& p, int b, int chunk_index);
int chunk_count(const AttnParams& p);  // over the whole batch

}  // namespace swa::dut
