#pragma once
// The rules of a paged KV cache (golden/README.md, "Paged KV cache"), shared by the golden's cache
// model and the DUTs' page bookkeeping as ring_slots.hpp is for rings. Sequence b's position p lives
// in its logical page p / page_size at offset p % page_size; its page table maps logical pages to
// physical pages of the pool the batch shares.
//
// Bookkeeping happens around each call of a schedule (a prefill chunk or a decode step), never
// inside it, as a serving stack's scheduler does around its kernels:
//  - before the call, each sequence in batch order takes pages, in increasing logical order, for
//    the rows [s, e) it writes from first_stored_row on;
//  - after the call, each sequence in batch order frees its pages whose positions all lie below
//    band_first_key(band, e), the first position the next query can see, lowest logical page first.
// Free pages form a stack: the most recently freed is taken first; never-used pages lie beneath,
// in AttnParams::page_order.
#include <cstdint>

#include "swa/params.hpp"

namespace swa {

// Leading logical pages that no query from `query` on can see.
SWA_HOST_DEVICE constexpr std::int64_t pages_dead_before(WindowBand band, std::int64_t query, int page_size) {
  return band_first_key(band, query) / page_size;
}

// The first row of a write of [s, e) that is stored: rows in pages dead to the next reader are not
// (a prefill chunk longer than the window). next_reader: the first query that reads the cache after
// the write, e for a prefill chunk (its own queries read the chunk from the inputs), s for a decode
// step (it reads its own row from the cache).
SWA_HOST_DEVICE constexpr std::int64_t first_stored_row(WindowBand band, std::int64_t s, std::int64_t next_reader,
                                                        int page_size) {
  const std::int64_t dead_end = pages_dead_before(band, next_reader, page_size) * page_size;
  return s > dead_end ? s : dead_end;
}

// Logical pages a sequence of `len` positions spans.
constexpr std::int64_t logical_pages(std::int64_t len, int page_size) { return (len + page_size - 1) / page_size; }

// The rows [s, e) each call writes for sequence b, in schedule order, with its next reader; f is
// called as f(s, e, next_reader). Prompt chunks of p.chunk (the whole prompt when 0), then decode steps.
template <class F>
void for_each_cache_write(const AttnParams& p, int b, F&& f) {
  const std::int64_t prompt = p.mode == RunMode::decode ? p.seq_lens[b] - p.decode_steps : p.seq_lens[b];
  const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
  for (std::int64_t s = 0; s < prompt; s += chunk) {
    const std::int64_t e = s + chunk < prompt ? s + chunk : prompt;
    f(s, e, e);
  }
  for (std::int64_t i = prompt; i < p.seq_lens[b]; ++i) f(i, i + 1, i);
}

// The pool a paged schedule gets: the sum over sequences of the most pages each holds at once
// (during a call, before its frees).
std::int64_t paged_pool_pages(const AttnParams& p);

// Throws std::invalid_argument naming the field: page_size 1..4096, pool_pages >= paged_pool_pages,
// page_order a permutation of 0..pool_pages-1.
void validate_paging(const AttnParams& p);

inline constexpr int kMaxPageSize = 4096;

}  // namespace swa
