#pragma once
// What the CUDA kernels need beyond AttnParams, and the index arithmetic they share with the host:
// which sequence a CTA serves, where a key position lives (cache slot or fresh row), which slots a
// decode step reads and which chunk positions survive a ring write. Everything here is plain
// host/device code so dut/cuda/tests checks it on a CPU.
#include <cmath>
#include <cstdint>

#include "swa/dut/visibility.hpp"
#include "swa/params.hpp"
#include "swa/ring_slots.hpp"

namespace swa::dut::cuda {

// Query rows [row_begin[b], row_end[b]) of each sequence b that one launch computes, cut into tiles
// of the kernel's row count; tile_prefix[b] counts the tiles of sequences before b, so
// tile_prefix[batch] is the grid size. Device pointers.
struct RowWork {
  const std::int64_t* row_begin = nullptr;
  const std::int64_t* row_end = nullptr;
  const std::int32_t* tile_prefix = nullptr;
};

// The sequence a tile belongs to: the b with tile_prefix[b] <= tile < tile_prefix[b + 1]. Sequences
// with no tiles (equal neighbours) are never returned.
SWA_HOST_DEVICE inline int sequence_of_tile(const std::int32_t* tile_prefix, int batch, std::int32_t tile) {
  int lo = 0, hi = batch;  // tile_prefix[lo] <= tile < tile_prefix[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (tile_prefix[mid] <= tile) lo = mid;
    else hi = mid;
  }
  return lo;
}

// What CTA (tile, head) of a prefill launch serves: query rows [r0, r1) of sequence b for q head
// `head` (kv head `kv_head`), and the keys the band lets those rows see among [0, rows_end), the end
// of this call's rows; keys before fresh_begin come from the cache.
struct QueryTile {
  int b = 0, head = 0, kv_head = 0;
  std::int64_t r0 = 0, r1 = 0;
  std::int64_t fresh_begin = 0, rows_end = 0;
  std::int64_t seq_len = 0;
  KeyRange keys;
};

SWA_HOST_DEVICE inline QueryTile query_tile(const AttnParams& p, const RowWork& work, std::int32_t tile, int head,
                                            int tile_rows) {
  QueryTile t;
  t.b = sequence_of_tile(work.tile_prefix, p.batch, tile);
  t.head = head;
  t.kv_head = kv_head_for(head, p.heads_q, p.heads_kv);
  t.fresh_begin = work.row_begin[t.b];
  t.rows_end = work.row_end[t.b];
  t.r0 = t.fresh_begin + static_cast<std::int64_t>(tile - work.tile_prefix[t.b]) * tile_rows;
  t.r1 = t.r0 + tile_rows < t.rows_end ? t.r0 + tile_rows : t.rows_end;
  t.seq_len = p.seq_lens[t.b];
  t.keys = band_key_range(p.band, t.r0, t.r1, 0, t.rows_end);
  return t;
}

SWA_HOST_DEVICE constexpr std::int64_t tiles_for_rows(std::int64_t rows, int tile_rows) {
  return rows > 0 ? (rows + tile_rows - 1) / tile_rows : 0;
}

// A KV cache on the device, laid out as swa::dut::KvCache: [batch, slots, heads_kv, head_size] in
// the run's dtype, or for a paged cache the pool [pages, page_size, heads_kv, head_size] addressed
// through page_table [batch, table_width] (-1: no page; slot = position). k == nullptr means no
// cache (prefill).
struct CacheView {
  CachePolicy policy = CachePolicy::linear;
  std::int64_t slots = 0;
  int heads_kv = 0;
  int head_size = 0;
  void* k = nullptr;
  void* v = nullptr;
  const RingGeometry* geometry = nullptr;  // [batch]
  int page_size = 0;
  std::int64_t table_width = 0;
  const std::int32_t* page_table = nullptr;
};

SWA_HOST_DEVICE inline bool by_position(CachePolicy policy) {
  return policy == CachePolicy::linear || policy == CachePolicy::paged;
}

// Paged: the physical page holding slot (= position) `slot` of sequence b, -1 when none.
SWA_HOST_DEVICE inline std::int32_t cache_page(const CacheView& c, int b, std::int64_t slot) {
  return c.page_table[b * c.table_width + slot / c.page_size];
}

SWA_HOST_DEVICE inline std::int64_t cache_slot(const CacheView& c, int b, std::int64_t pos) {
  return by_position(c.policy) ? pos : ring_slot(c.geometry[b], pos);
}

// Element offset of (slot, head); a paged slot's page must be held.
SWA_HOST_DEVICE inline std::int64_t cache_element(const CacheView& c, int b, std::int64_t slot, int head) {
  if (c.policy == CachePolicy::paged)
    return ((static_cast<std::int64_t>(cache_page(c, b, slot)) * c.page_size + slot % c.page_size) * c.heads_kv +
            head) * c.head_size;
  return ((static_cast<std::int64_t>(b) * c.slots + slot) * c.heads_kv + head) * c.head_size;
}

// Position a slot holds once positions up to `newest` were written in order; -1 when none (a paged
// slot whose page is not held holds none).
SWA_HOST_DEVICE inline std::int64_t cached_position(const CacheView& c, int b, std::int64_t slot,
                                                    std::int64_t newest) {
  if (newest < 0) return -1;
  if (c.policy == CachePolicy::linear) return slot <= newest ? slot : -1;
  if (c.policy == CachePolicy::paged) return slot <= newest && cache_page(c, b, slot) >= 0 ? slot : -1;
  return ring_slot_position(c.geometry[b], slot, newest);
}

// Where key position `pos` of sequence b, kv head `head`, is read in a (chunked) prefill: positions
// from `fresh_begin` on are this call's rows of p.k/p.v, earlier ones are in the cache.
struct KeyLocation {
  bool in_cache = false;
  std::int64_t k_element = 0, v_element = 0;
};

SWA_HOST_DEVICE inline KeyLocation locate_key(const AttnParams& p, const CacheView& c, std::int64_t fresh_begin,
                                              int b, std::int64_t pos, int head) {
  if (c.k == nullptr || pos >= fresh_begin) {
    const std::int64_t row = p.seq_offsets[b] + pos;
    return {false, row * p.k_row_stride + head * p.k_head_stride, row * p.v_row_stride + head * p.v_head_stride};
  }
  const std::int64_t e = cache_element(c, b, cache_slot(c, b, pos), head);
  return {true, e, e};
}

// Whether position pos of a chunk [s, e) written in order ends in the cache: at or above a compact
// ring's base, and not overwritten by a later position of the same chunk. A parallel write kernel
// writes exactly these, so no two threads race for a slot.
// (A paged cache's positions never share a slot; whether a page is held is cache_writes_position's.)
SWA_HOST_DEVICE constexpr bool survives_chunk_write(CachePolicy policy, RingGeometry g, std::int64_t pos,
                                                    std::int64_t e) {
  if (pos < g.base) return false;
  return policy == CachePolicy::linear || policy == CachePolicy::paged || pos + g.capacity >= e;
}

// Whether a write of chunk [s, e) stores position pos of sequence b: it survives, and in a paged
// cache its page was taken (pages of rows no later query sees are not).
SWA_HOST_DEVICE inline bool cache_writes_position(const CacheView& c, int b, std::int64_t pos, std::int64_t e) {
  if (!survives_chunk_write(c.policy, c.geometry[b], pos, e)) return false;
  return c.policy != CachePolicy::paged || cache_page(c, b, pos) >= 0;
}

// Slots a decode step at q_pos visits: the whole ring, or the window of a linear or paged cache.
SWA_HOST_DEVICE constexpr KeyRange decode_slot_range(CachePolicy policy, std::int64_t slots, WindowBand band,
                                                     std::int64_t q_pos) {
  if (policy != CachePolicy::linear && policy != CachePolicy::paged) return {0, slots};
  return {band_first_key(band, q_pos), q_pos + 1 < slots ? q_pos + 1 : slots};
}

// The kernels keep scores in base 2 (x = s log2 e, so exp2 replaces exp). The soft-cap
// c tanh(s / c) is then c2 tanh(x / c2) with c2 = c log2 e; cap_log2 == 0 leaves x alone.
SWA_HOST_DEVICE inline float soft_cap_log2(float x, float cap_log2) {
  return cap_log2 > 0.f ? cap_log2 * tanhf(x / cap_log2) : x;
}
SWA_HOST_DEVICE inline float cap_in_log2(const AttnParams& p) { return p.softcap * 1.4426950408889634f; }

// What turns a row's unnormalised output into the normalised one, given its final base-2 max m and
// sum l: 1 / l, or with the head's sink logit s (natural units) joining the denominator,
// 2^(m - m') / (l 2^(m - m') + 2^(s log2 e - m')) with m' = max(m, s log2 e). 0 for a row that saw
// no key (it outputs 0, sink or not).
SWA_HOST_DEVICE inline float row_normaliser(float m, float l, const float* sinks, int head) {
  if (!(l > 0.f)) return 0.f;
  if (sinks == nullptr) return 1.f / l;
  const float sink = sinks[head] * 1.4426950408889634f;
  const float top = fmaxf(m, sink);
  const float keys = exp2f(m - top);
  return keys / (l * keys + exp2f(sink - top));
}

// The weight 2^(m - most) of a partial softmax state with base-2 max m when states merge under the
// common max `most`; a state that saw no key (m = -inf) weighs 0.
SWA_HOST_DEVICE inline float merge_weight(float m, float most) { return m == -INFINITY ? 0.f : exp2f(m - most); }

// Split `split` of `splits` near-equal, contiguous parts of r (flash-decoding); may be empty.
SWA_HOST_DEVICE constexpr KeyRange split_range(KeyRange r, int splits, int split) {
  const std::int64_t n = r.end > r.first ? r.end - r.first : 0;
  const std::int64_t per = (n + splits - 1) / splits;
  const std::int64_t first = r.first + split * per;
  const std::int64_t end = first + per < r.end ? first + per : r.end;
  return {first, end > first ? end : first};
}

// A decode CTA reads each K/V row once for up to kHeadsPerCta q heads of its kv head (GQA): a
// group of heads_q / heads_kv heads takes ceil(group / kHeadsPerCta) CTAs, the last one partly
// empty when the group is not a multiple of it.
constexpr int kHeadsPerCta = 4;
constexpr int kDecodeThreads = 32 * kHeadsPerCta;  // a warp per q head of the chunk
SWA_HOST_DEVICE inline int decode_head_chunks(const AttnParams& p) {
  return (p.heads_q / p.heads_kv + kHeadsPerCta - 1) / kHeadsPerCta;
}
SWA_HOST_DEVICE inline int decode_ctas_per_split(const AttnParams& p) {
  return p.batch * p.heads_kv * decode_head_chunks(p);
}
// The counters a decode launch counts its finished splits in (decode_merge.cuh): one per CTA of a
// split, i.e. per (sequence, kv head, head chunk).
SWA_HOST_DEVICE inline std::int64_t decode_arrival_counters(const AttnParams& p) { return decode_ctas_per_split(p); }

// The q heads [first, first + count) that decode CTA row `cta_row` (kv head x head chunk) serves.
struct DecodeHeads {
  int kv_head = 0, first = 0, count = 0;
};
SWA_HOST_DEVICE inline DecodeHeads decode_heads(const AttnParams& p, int cta_row) {
  const int chunks = decode_head_chunks(p), group = p.heads_q / p.heads_kv;
  const int kv_head = cta_row / chunks, first_in_group = cta_row % chunks * kHeadsPerCta;
  const int count = group - first_in_group < kHeadsPerCta ? group - first_in_group : kHeadsPerCta;
  return {kv_head, kv_head * group + first_in_group, count};
}

// Splits of a decode launch: as many as fill kDecodeWaves waves of the CTAs the GPU holds at once
// (`resident` = multiprocessors x the split kernel's CTAs per multiprocessor; `ctas` = the launch's
// CTAs per split), rounded down so no wave runs a few CTAs alone, but no split shorter than 128
// slots (four tiles of the CUDA-core kernel, two of the tensor-core one), and at most kMaxDecodeSplits.
constexpr int kMaxDecodeSplits = 64;
constexpr int kDecodeWaves = 1;  // two waves were slower on an H100 (dut/cuda/README.md)
SWA_HOST_DEVICE constexpr int decode_split_count(std::int64_t longest_range, int ctas, int resident) {
  std::int64_t splits = kDecodeWaves * static_cast<std::int64_t>(resident) / ctas;
  const std::int64_t by_length = longest_range / 128;
  if (splits > by_length) splits = by_length;
  if (splits > kMaxDecodeSplits) splits = kMaxDecodeSplits;
  return splits < 1 ? 1 : static_cast<int>(splits);
}

}  // namespace swa::dut::cuda
