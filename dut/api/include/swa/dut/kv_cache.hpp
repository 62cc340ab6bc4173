#pragma once
// The KV cache a DUT reads and writes during chunked prefill and decode, in host memory with an
// explicit layout, so every backend (and an external one) sees the same thing.
#include <cstdint>
#include <vector>

#include "swa/params.hpp"
#include "swa/ring_slots.hpp"

namespace swa::dut {

// K and V are [batch, slots, heads_kv, head_size] in the run's dtype, or FP8 codes (one byte each)
// when `format` is FP8 (descales: AttnParams::k_descale, v_descale). A ring has `window` slots
// (slot of position p: ring_slot(geometry[b], p)); a linear cache has max_len slots (slot = p).
// geometry[b].base of a compact ring is fixed by the sequence's first write (compact_ring_base).
// tokens_written[b] counts positions [0, tokens_written[b]) already written for sequence b.
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

  std::size_t element_bytes() const { return kv_element_bytes(format, dtype); }
  std::size_t offset(int b, std::int64_t slot, int head) const {
    return ((static_cast<std::size_t>(b) * slots + slot) * heads_kv + head) * head_size * element_bytes();
  }
  std::int64_t slot_of(int b, std::int64_t pos) const {
    return policy == CachePolicy::linear ? pos : ring_slot(geometry[b], pos);
  }
  // Position held by `slot` of sequence b, or -1 when never written.
  std::int64_t position_in(int b, std::int64_t slot) const;
};

// The bookkeeping of writing sequence rows [s, e) without the copy (a device DUT copies on the device
// and downloads): the first write fixes a compact ring's base; tokens_written becomes e.
void advance_cache_metadata(KvCache& cache, int b, std::int64_t s, std::int64_t e);

// Host copy of sequence rows [s, e) of p.k/p.v into the cache (FP8: quantised, fp8.hpp), in order (later positions overwrite
// earlier ones in a ring); the first write fixes a compact ring's base. Positions below it are not stored.
void write_rows_to_cache(const AttnParams& p, KvCache& cache, int b, std::int64_t s, std::int64_t e);

// Window slots for a ring (band.left + 1), the longest sequence for a linear cache.
KvCache make_kv_cache(const AttnParams& p);

// The rows of sequence b's chunk c: [c * chunk, min((c + 1) * chunk, prompt)), chunk = whole prompt
// when p.chunk == 0.
std::int64_t chunk_begin(const AttnParams& p, int b, int chunk_index);
std::int64_t chunk_end(const AttnParams& p, int b, int chunk_index);
int chunk_count(const AttnParams& p);  // over the whole batch

}  // namespace swa::dut
