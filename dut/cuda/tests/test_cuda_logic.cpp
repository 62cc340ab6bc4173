#define BOOST_TEST_MODULE dut_cuda_logic
// The CUDA kernels' index arithmetic, run on the CPU: tile-to-sequence lookup, where keys live in
// the caches, which chunk positions a parallel cache write keeps, decode slot ranges and splits, and
// the mma.sync register layouts the tensor-core kernel addresses shared memory with.
#include <boost/test/unit_test.hpp>
#include <set>
#include <vector>

#include "kernel_args.hpp"
#include "mma_fragment.hpp"
#include "swa/dut/kv_cache.hpp"

using namespace swa;
using namespace swa::dut;
using namespace swa::dut::cuda;

BOOST_AUTO_TEST_CASE(every_tile_finds_its_sequence_and_empty_sequences_are_skipped) {
  const std::vector<std::int64_t> rows = {130, 0, 1, 64, 0, 0, 65};
  std::vector<std::int32_t> prefix(rows.size() + 1, 0);
  for (std::size_t b = 0; b < rows.size(); ++b) prefix[b + 1] = prefix[b] + tiles_for_rows(rows[b], 64);
  BOOST_TEST(prefix.back() == 3 + 0 + 1 + 1 + 0 + 0 + 2);
  for (std::int32_t tile = 0; tile < prefix.back(); ++tile) {
    const int b = sequence_of_tile(prefix.data(), static_cast<int>(rows.size()), tile);
    BOOST_TEST(prefix[b] <= tile);
    BOOST_TEST(tile < prefix[b + 1]);
    BOOST_TEST(rows[b] > 0);
  }
  // Rows [begin, end) of each sequence (a chunk starting at 100) cut into 64-row tiles, every row once.
  std::vector<std::int64_t> begin(rows.size(), 100), end(rows.size());
  for (std::size_t b = 0; b < rows.size(); ++b) end[b] = begin[b] + rows[b];
  std::vector<std::int32_t> lens(rows.size());
  for (std::size_t b = 0; b < rows.size(); ++b) lens[b] = static_cast<std::int32_t>(end[b]);
  AttnParams p;
  p.batch = static_cast<int>(rows.size());
  p.seq_lens = lens.data();
  p.heads_q = 8;
  p.heads_kv = 2;
  p.band = band_from_window(30, WindowConvention::keys_including_self);
  const RowWork work{begin.data(), end.data(), prefix.data()};
  std::vector<std::int64_t> covered(rows.size(), 0);
  for (std::int32_t tile = 0; tile < prefix.back(); ++tile) {
    const QueryTile t = query_tile(p, work, tile, 5, 64);
    BOOST_TEST(t.kv_head == 1);
    BOOST_TEST(t.keys.first == std::max<std::int64_t>(0, t.r0 - 29));
    BOOST_TEST(t.keys.end == t.r1);
    BOOST_TEST(t.r0 >= begin[t.b]);
    BOOST_TEST(t.r1 <= end[t.b]);
    BOOST_TEST(t.r1 - t.r0 >= 1);
    BOOST_TEST(t.r1 - t.r0 <= 64);
    BOOST_TEST(t.fresh_begin == begin[t.b]);
    covered[t.b] += t.r1 - t.r0;
  }
  BOOST_TEST((covered == rows));
}

namespace {

// A host cache written chunk by chunk the way the DUTs do, with every position's bytes distinct.
struct CacheFixture {
  AttnParams p;
  std::vector<std::int32_t> lens;
  std::vector<std::int64_t> offsets;
  std::vector<float> k, v;
  std::vector<std::int32_t> order;
  KvCache cache;

  CacheFixture(CachePolicy policy, std::int64_t window, std::vector<std::int32_t> l) : lens(std::move(l)) {
    offsets.assign(lens.size() + 1, 0);
    for (std::size_t b = 0; b < lens.size(); ++b) offsets[b + 1] = offsets[b] + lens[b];
    p.batch = static_cast<int>(lens.size());
    p.seq_lens = lens.data();
    p.seq_offsets = offsets.data();
    p.heads_q = 4;
    p.heads_kv = 2;
    p.head_size = 8;
    p.band = band_from_window(window, WindowConvention::keys_including_self);
    p.mode = RunMode::chunked_prefill;
    p.cache = policy;
    set_contiguous_strides(p);
    k.resize(offsets.back() * p.heads_kv * p.head_size);
    v.resize(k.size());
    for (std::size_t i = 0; i < k.size(); ++i) {
      k[i] = static_cast<float>(i);
      v[i] = -static_cast<float>(i);
    }
    p.k = k.data();
    p.v = v.data();
    if (policy == CachePolicy::paged) {  // pages of 4, never freed here, a reversed pool
      p.page_size = 4;
      for (auto len : lens) p.pool_pages += static_cast<int>(logical_pages(len, p.page_size));
      for (int page = p.pool_pages - 1; page >= 0; --page) order.push_back(page);
      p.page_order = order.data();
    }
    cache = make_kv_cache(p);
  }

  // What the harness does before a write of rows [s, e) of sequence b (a paged cache's pages).
  void take(int b, std::int64_t s, std::int64_t e) {
    if (cache.paged()) take_pages(cache, b, s, e);
  }

  CacheView view() {
    return {cache.policy, cache.slots, cache.heads_kv, cache.head_size, cache.k.data(), cache.v.data(),
            cache.geometry.data(), cache.page_size, cache.table_width,
            cache.paged() ? cache.page_table.data() : nullptr};
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(keys_below_the_chunk_come_from_the_slot_the_host_cache_wrote) {
  for (CachePolicy policy : kAllCachePolicies)
    for (std::int64_t chunk : {5, 12, 31}) {
      CacheFixture f(policy, 12, {40, 17});
      for (std::int64_t s = 0; s < 40; s += chunk) {
        for (int b = 0; b < f.p.batch; ++b) {
          const std::int64_t begin = std::min<std::int64_t>(s, f.lens[b]);
          const std::int64_t end = std::min<std::int64_t>(s + chunk, f.lens[b]);
          for (std::int64_t pos = band_first_key(f.p.band, begin); pos < end; ++pos)
            for (int head = 0; head < f.p.heads_kv; ++head) {
              const KeyLocation at = locate_key(f.p, f.view(), begin, b, pos, head);
              BOOST_TEST(at.in_cache == (pos < begin));
              const float* key = at.in_cache ? reinterpret_cast<const float*>(f.cache.k.data()) + at.k_element
                                             : f.k.data() + at.k_element;
              const float* value = at.in_cache ? reinterpret_cast<const float*>(f.cache.v.data()) + at.v_element
                                               : f.v.data() + at.v_element;
              const std::int64_t expected = ((f.offsets[b] + pos) * f.p.heads_kv + head) * f.p.head_size;
              BOOST_TEST(key[0] == f.k[expected], cache_name(policy) << " chunk " << chunk << " pos " << pos);
              BOOST_TEST(value[3] == f.v[expected + 3]);
            }
          f.take(b, begin, end);
          if (begin < end) write_rows_to_cache(f.p, f.cache, b, begin, end);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(device_slot_arithmetic_matches_the_host_cache) {
  for (CachePolicy policy : kAllCachePolicies) {
    CacheFixture f(policy, 9, {50, 23});
    for (int b = 0; b < f.p.batch; ++b) {
      f.take(b, 0, f.lens[b] - 5);  // the last page or two not taken: -1 slots
      write_rows_to_cache(f.p, f.cache, b, 0, f.lens[b]);
    }
    const CacheView view = f.view();
    for (int b = 0; b < f.p.batch; ++b)
      for (std::int64_t slot = 0; slot < f.cache.slots; ++slot) {
        BOOST_TEST(cached_position(view, b, slot, f.cache.tokens_written[b] - 1) == f.cache.position_in(b, slot));
        BOOST_TEST(static_cast<std::size_t>(cache_element(view, b, slot, 1)) * sizeof(float) ==
                   f.cache.offset(b, slot, 1));
      }
    for (std::int64_t pos = 0; pos < 23; ++pos) BOOST_TEST(cache_slot(view, 1, pos) == f.cache.slot_of(1, pos));
  }
}

// Writing only the surviving positions, in any order, leaves the same cache as writing every
// position in order: the property that lets one CTA per position write without races.
BOOST_AUTO_TEST_CASE(surviving_positions_reproduce_an_in_order_write) {
  for (CachePolicy policy : kAllCachePolicies)
    for (std::int64_t first_chunk : {3, 7, 20})
      for (std::int64_t chunk : {1, 4, 7, 15}) {
        const std::int64_t capacity = 7, total = 60;
        const bool positional = by_position(policy);  // linear and paged: slot = position
        std::vector<std::int64_t> in_order(positional ? total : capacity, -1), parallel = in_order;
        RingGeometry g{static_cast<std::int64_t>(in_order.size()), 0};
        if (policy == CachePolicy::ring_compact) g.base = compact_ring_base(first_chunk, capacity);
        auto slot_of = [&](std::int64_t pos) { return positional ? pos : ring_slot(g, pos); };
        for (std::int64_t s = 0; s < total;) {
          const std::int64_t e = std::min(total, s + (s == 0 ? first_chunk : chunk));
          for (std::int64_t pos = std::max(s, g.base); pos < e; ++pos) in_order[slot_of(pos)] = pos;
          std::set<std::int64_t> slots_written;
          for (std::int64_t pos = e - 1; pos >= s; --pos)  // reverse order: no ordering to lean on
            if (survives_chunk_write(policy, g, pos, e)) {
              BOOST_TEST(slots_written.insert(slot_of(pos)).second, "two survivors share a slot");
              parallel[slot_of(pos)] = pos;
            }
          BOOST_TEST((parallel == in_order), cache_name(policy) << " first " << first_chunk << " chunk " << chunk);
          s = e;
        }
      }
}

BOOST_AUTO_TEST_CASE(decode_splits_cover_the_visible_slots_exactly_once) {
  const WindowBand band = band_from_window(100, WindowConvention::keys_including_self);
  for (CachePolicy policy : kAllCachePolicies)
    for (std::int64_t q_pos : {0, 57, 99, 100, 4000}) {
      const std::int64_t slots = by_position(policy) ? 4001 : 100;
      const KeyRange range = decode_slot_range(policy, slots, band, q_pos);
      if (by_position(policy)) {
        BOOST_TEST(range.first == band_first_key(band, q_pos));
        BOOST_TEST(range.end == q_pos + 1);
      }
      for (int splits : {1, 3, 7, 64}) {
        std::int64_t next = range.first;
        for (int s = 0; s < splits; ++s) {
          const KeyRange part = split_range(range, splits, s);
          if (part.end == part.first) continue;
          BOOST_TEST(part.first == next);
          next = part.end;
        }
        BOOST_TEST(next == range.end, "splits " << splits);
      }
    }
  // resident = 132 multiprocessors x 4 CTAs = 528
  BOOST_TEST(decode_split_count(100000, 160, 528) == 3 * kDecodeWaves);  // 528 / 160 CTAs, rounded down
  BOOST_TEST(decode_split_count(4096, 32, 528) == 16 * kDecodeWaves);
  BOOST_TEST(decode_split_count(4096, 1, 528) == 32);  // capped by 128 slots per split
  BOOST_TEST(decode_split_count(100000, 1, 528) == 64);
  BOOST_TEST(decode_split_count(5, 1, 528) == 1);
  BOOST_TEST(decode_split_count(4096, 100000, 528) == 1);  // more CTAs per split than fit: one split
}

BOOST_AUTO_TEST_CASE(decode_ctas_serve_every_q_head_once_with_its_own_kv_head) {
  for (int heads_kv : {1, 2, 3, 8})
    for (int group : {1, 2, 3, 4, 5, 6, 8, 9, 32}) {
      AttnParams p;
      p.batch = 2;
      p.heads_kv = heads_kv;
      p.heads_q = heads_kv * group;
      std::vector<int> served(p.heads_q, 0);
      const int rows = p.heads_kv * decode_head_chunks(p);
      BOOST_TEST(decode_ctas_per_split(p) == p.batch * rows);
      for (int row = 0; row < rows; ++row) {
        const DecodeHeads h = decode_heads(p, row);
        BOOST_TEST((h.count >= 1 && h.count <= kHeadsPerCta));
        for (int head = h.first; head < h.first + h.count; ++head) {
          BOOST_REQUIRE(head >= 0 && head < p.heads_q);
          ++served[head];
          BOOST_TEST(kv_head_for(head, p.heads_q, p.heads_kv) == h.kv_head);
        }
      }
      for (int head = 0; head < p.heads_q; ++head)
        BOOST_TEST(served[head] == 1, "Hq " << p.heads_q << " Hkv " << p.heads_kv << " head " << head);
    }
}

namespace {

template <class Coord>
void covers_exactly_once(int rows, int cols, int per_lane, Coord coord) {
  std::vector<int> hits(rows * cols, 0);
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < per_lane; ++e) {
      const FragCoord at = coord(lane, e);
      BOOST_REQUIRE(at.row >= 0 && at.row < rows && at.col >= 0 && at.col < cols);
      ++hits[at.row * cols + at.col];
    }
  for (int h : hits) BOOST_TEST(h == 1);
}

}  // namespace

BOOST_AUTO_TEST_CASE(mma_fragments_cover_their_tiles_once) {
  covers_exactly_once(16, 16, 8, [](int l, int e) { return mma_a_coord(l, e); });
  covers_exactly_once(16, 8, 4, [](int l, int e) { return mma_b_coord(l, e); });
  covers_exactly_once(16, 8, 4, [](int l, int e) { return mma_c_coord(l, e); });
  // The pairs the kernel loads as one 32-bit word are adjacent along the dimension contiguous in
  // shared memory: A along k (columns), B along k (rows), C along n (columns).
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 8; e += 2) {
      BOOST_TEST(mma_a_coord(lane, e + 1).col == mma_a_coord(lane, e).col + 1);
      BOOST_TEST(mma_a_coord(lane, e).col % 2 == 0);
      if (e < 4) {
        BOOST_TEST(mma_b_coord(lane, e + 1).row == mma_b_coord(lane, e).row + 1);
        BOOST_TEST(mma_b_coord(lane, e + 1).col == mma_b_coord(lane, e).col);
        BOOST_TEST(mma_c_coord(lane, e + 1).col == mma_c_coord(lane, e).col + 1);
      }
    }
}

// FlashAttention-2's register reuse: the S accumulators of n8 blocks 2kk and 2kk+1 hold, lane for
// lane, exactly the P elements the A operand of k16 block kk needs.
BOOST_AUTO_TEST_CASE(score_accumulators_are_the_probability_operand) {
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 8; ++e) {
      const FragCoord a = mma_a_coord(lane, e);
      const FragCoord c = mma_c_coord(lane, p_source_element(e));
      BOOST_TEST(a.row == c.row, "lane " << lane << " element " << e);
      BOOST_TEST(a.col == c.col + 8 * p_source_block(e), "lane " << lane << " element " << e);
    }
}
