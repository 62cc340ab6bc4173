#pragma once
// FlashAttention-2-style prefill on tensor cores (mma.sync.m16n8k16, fp16/bf16 in, fp32
// accumulate). A CTA of 8 warps (4 for D > 128) serves 128 (64) query rows of one (sequence,
// q head) of the packed ragged batch; each warp owns 16 rows and keeps S, P and O in registers. Q
// and the K/V tiles stream global -> shared through cp.async, two stages deep (the next tile lands
// while this one is computed), into a swizzled layout that ldmatrix reads without bank conflicts.
// Only key tiles that intersect the band are loaded, the grid's longest tiles first; keys below the
// call's first row come from the KV cache; masking runs on the band's edge tiles only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "async_copy.cuh"
#include "fast_exp2.cuh"
#include "kernel_args.hpp"
#include "ldmatrix.cuh"
#include "launch.hpp"
#include "mma_fragment.hpp"
#include "shared_memory.cuh"
#include "storage.cuh"
#include "tensor_core_ops.cuh"

namespace swa::dut::cuda {

template <class T, int D>
struct MmaTile {
  static constexpr int kWarps = prefill_tile_rows(true, D) / 16;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;
  static constexpr int kKeys = D <= 128 ? 64 : 32;  // keeps S + O registers and shared memory in bounds
  static constexpr int kStages = 2;                 // K/V tiles in shared memory: one computed, one in flight
  static constexpr int kChunks = D / 8;             // 16-byte chunks of a row
  // Rows of Q, K and V are kept as they are in memory (V is transposed by ldmatrix.trans). Where a
  // row has a multiple of 8 chunks, chunk c of row r is stored at c ^ (r % 8) within its group of 8
  // (the swizzle): the 8 rows an ldmatrix reads, and the 8 chunks a quarter-warp copies, then fall
  // in 8 distinct groups of 4 banks. Other rows (D 80, 96, 160: an even number of chunks) are
  // padded by one chunk: an odd stride, so 8 rows at one column fall in 8 groups too.
  static constexpr bool kSwizzled = kChunks % 8 == 0;
  static constexpr int kRowChunks = kSwizzled ? kChunks : kChunks + 1;
  static constexpr int kQBytes = kRows * kRowChunks * 16;
  static constexpr int kKvTileBytes = kKeys * kRowChunks * 16;
  static constexpr int kSmemBytes = kQBytes + kStages * 2 * kKvTileBytes;
  static_assert(kRows == prefill_tile_rows(true, D));
  static_assert(D % 16 == 0 && kKeys % 16 == 0 && kChunks % 2 == 0);

  // The byte offset of chunk `chunk` of row `row` in a Q, K or V tile.
  SWA_HOST_DEVICE static constexpr int chunk_offset(int row, int chunk) {  // chunk == kChunks: the pad
    if constexpr (kSwizzled) return 16 * (row * kChunks + ((chunk & ~7) | ((chunk ^ row) & 7)));
    else return 16 * (row * kRowChunks + chunk);
  }
};

// Min blocks 1: every register a thread may have (by default ptxas held the 8-warp D = 64 kernel
// to 128 registers, and it spilled).
template <class T, int D>
__global__ void __launch_bounds__(MmaTile<T, D>::kThreads, 1)
    prefill_mma_kernel(AttnParams p, RowWork work, CacheView cache) {
  using Tile = MmaTile<T, D>;
  using Ops = TensorCoreOps<T>;
  constexpr int kKeys = Tile::kKeys, kChunks = Tile::kChunks;
  unsigned char* qs = dynamic_shared<unsigned char>();  // [kRows] rows of Q
  unsigned char* kv = qs + Tile::kQBytes;              // per stage: [kKeys] rows of K, then of V

  // CTAs start in blockIdx order, so the tiles go last to first: a sequence's late tiles see the
  // whole band, its first ones a ramp of keys, and the short ones then fill the tail of the grid.
  const auto tile = static_cast<std::int32_t>(gridDim.x - 1 - blockIdx.x);
  const QueryTile t = query_tile(p, work, tile, blockIdx.y, Tile::kRows);
  const int b = t.b, head = t.head, kv_head = t.kv_head;
  const std::int64_t r0 = t.r0, r1 = t.r1, fresh_begin = t.fresh_begin, seq_len = t.seq_len;
  const KeyRange keys = t.keys;
  const Visibility vis(p);

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const T* cache_k = static_cast<const T*>(cache.k);
  const T* cache_v = static_cast<const T*>(cache.v);

  // Q goes global -> shared with cp.async, in the first copy group with the first K/V tile. The
  // copies walk the stored chunks, a padded row's pad included (zeros), so the 8 lanes of a
  // quarter-warp always write 8 consecutive chunks: 8 distinct groups of banks.
  constexpr int kRowChunks = Tile::kRowChunks;
  for (int i = threadIdx.x; i < Tile::kRows * kRowChunks; i += Tile::kThreads) {
    const int r = i / kRowChunks, c = i % kRowChunks, col = c * 8;
    const bool inside = r0 + r < r1 && c < kChunks;
    const T* row = inside ? q + (p.seq_offsets[b] + r0 + r) * p.q_row_stride + head * p.q_head_stride + col : q;
    copy_16_async(qs + Tile::chunk_offset(r, c), row, inside);
  }

  // The first key tile from c0 on that the band does not hide (uniform across the CTA).
  const auto visible_from = [&](std::int64_t c0) {
    while (c0 < keys.end &&
           vis.classify(r0, r1, c0, c0 + kKeys < keys.end ? c0 + kKeys : keys.end) == TileClass::hidden)
      c0 += kKeys;
    return c0;
  };
  // Keys [c0, c0 + kKeys) of K and V into a stage: cp.async from this call's rows or the cache, zeros
  // past the range (zero V: 0 * garbage may be NaN); FP8 codes are decoded through registers.
  const auto load_tile = [&](std::int64_t c0, int stage) {
    unsigned char* ks = kv + stage * 2 * Tile::kKvTileBytes;
    unsigned char* vs = ks + Tile::kKvTileBytes;
    const std::int64_t c1 = c0 + kKeys < keys.end ? c0 + kKeys : keys.end;
    // The format is uniform: one branch outside the loop keeps the FP8 decoding (most of the
    // kernel's code) out of the plain loop's instruction stream.
    if (!is_fp8(p.kv_format)) {
      for (int i = threadIdx.x; i < kKeys * kRowChunks; i += Tile::kThreads) {  // pads too, as for Q
        const int j = i / kRowChunks, c = i % kRowChunks, col = c * 8;
        const bool inside = c0 + j < c1 && c < kChunks;
        const T* k_row = k;
        const T* v_row = v;
        if (inside) {
          const KeyLocation at = locate_key(p, cache, fresh_begin, b, c0 + j, kv_head);
          k_row = (at.in_cache ? cache_k : k) + at.k_element + col;
          v_row = (at.in_cache ? cache_v : v) + at.v_element + col;
        }
        copy_16_async(ks + Tile::chunk_offset(j, c), k_row, inside);
        copy_16_async(vs + Tile::chunk_offset(j, c), v_row, inside);
      }
      return;
    }
    for (int i = threadIdx.x; i < kKeys * kRowChunks; i += Tile::kThreads) {
      const int j = i / kRowChunks, c = i % kRowChunks, col = c * 8;
      const bool inside = c0 + j < c1 && c < kChunks;
      uint4 k_chunk = make_uint4(0, 0, 0, 0), v_chunk = make_uint4(0, 0, 0, 0);
      if (inside) {
        const KeyLocation at = locate_key(p, cache, fresh_begin, b, c0 + j, kv_head);
        T k_elems[8], v_elems[8];
        load_fp8_kv(p, at.in_cache, k, cache.k, at.k_element + col, p.k_descale, k_elems);
        load_fp8_kv(p, at.in_cache, v, cache.v, at.v_element + col, p.v_descale, v_elems);
        memcpy(&k_chunk, static_cast<const void*>(k_elems), sizeof k_chunk);
        memcpy(&v_chunk, static_cast<const void*>(v_elems), sizeof v_chunk);
      }
      *reinterpret_cast<uint4*>(ks + Tile::chunk_offset(j, c)) = k_chunk;
      *reinterpret_cast<uint4*>(vs + Tile::chunk_offset(j, c)) = v_chunk;
    }
  };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const float cap_log2 = cap_in_log2(p);
  const float neg_inf = -INFINITY;
  float o[D / 8][4];
#pragma unroll
  for (int db = 0; db < D / 8; ++db)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[db][e] = 0.f;
  // Row statistics of the two rows this lane holds (accumulator rows g and g + 8); row_sum is this
  // lane's share until the final reduction across the four lanes of a row.
  float row_max[2] = {neg_inf, neg_inf}, row_sum[2] = {0.f, 0.f};

  std::int64_t c0 = visible_from(keys.first);
  if (c0 < keys.end) load_tile(c0, 0);
  commit_async_copies();
  for (int stage = 0; c0 < keys.end; stage ^= 1) {
    const std::int64_t c1 = c0 + kKeys < keys.end ? c0 + kKeys : keys.end;
    const TileClass cls = vis.classify(r0, r1, c0, c1);
    const std::int64_t next = visible_from(c0 + kKeys);
    if (next < keys.end) load_tile(next, stage ^ 1);  // its stage was consumed before the last barrier
    commit_async_copies();
    wait_async_copies<1>();  // all but the newest group: Q and this tile have landed
    __syncthreads();
    const unsigned char* ks = kv + stage * 2 * Tile::kKvTileBytes;
    const unsigned char* vs = ks + Tile::kKvTileBytes;

    // S = Q K^T for this warp's 16 rows. ldmatrix.x4 lanes: Q rows (lane % 8) + 8 ((lane / 8) % 2)
    // at chunk 2 kk + lane / 16 make the A fragment; K rows of key blocks nb and nb + 1 make two B's.
    float s[kKeys / 8][4];
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nb][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned a[4];
      ldmatrix<4, false>(a, qs + Tile::chunk_offset(warp * 16 + lane % 8 + 8 * ((lane / 8) % 2), 2 * kk + lane / 16));
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; nb += 2) {
        unsigned bk[4];
        ldmatrix<4, false>(bk, ks + Tile::chunk_offset(nb * 8 + 8 * (lane / 16) + lane % 8, 2 * kk + (lane / 8) % 2));
        const unsigned first[2] = {bk[0], bk[1]}, second[2] = {bk[2], bk[3]};
        Ops::mma(s[nb], a, first);
        Ops::mma(s[nb + 1], a, second);
      }
    }

    // Scale (and cap), mask, then the online softmax in base 2. Most tiles of a band are whole and
    // uncapped: they take the short path, so the long one (the visibility predicate and tanhf, 32
    // inlined copies each) stays out of the loop's instruction stream.
    const bool ragged = c1 - c0 < kKeys;
    float tile_max[2] = {neg_inf, neg_inf};
    if (ragged || cls == TileClass::partial || cap_log2 > 0.f) {
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const FragCoord at = mma_c_coord(lane, e);
          const std::int64_t row = r0 + warp * 16 + at.row, col = c0 + nb * 8 + at.col;
          float x = soft_cap_log2(s[nb][e] * scale_log2, cap_log2);
          if ((ragged && col >= c1) || (cls == TileClass::partial && !vis.visible_in_sequence(row, col, seq_len)))
            x = neg_inf;
          s[nb][e] = x;
        }
    } else {
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nb][e] *= scale_log2;
    }
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[nb][e]);
    float shift[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float new_max = fmaxf(row_max[h], tile_max[h]);
      shift[h] = new_max == neg_inf ? 0.f : new_max;  // a row with nothing visible yet keeps exp(-inf) = 0
      const float correction = row_max[h] == neg_inf ? 0.f : fast_exp2(row_max[h] - shift[h]);
      row_max[h] = new_max;
      row_sum[h] *= correction;
#pragma unroll
      for (int db = 0; db < D / 8; ++db) {
        o[db][2 * h] *= correction;
        o[db][2 * h + 1] *= correction;
      }
    }
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pe = fast_exp2(s[nb][e] - shift[e / 2]);
        s[nb][e] = pe;
        row_sum[e / 2] += pe;
      }

    // O += P V: the S accumulators of n8 blocks 2kk and 2kk+1 are the A operand of k16 block kk; V
    // rows (keys) kk*16 + (lane % 8) + 8 ((lane / 8) % 2) at chunk db + lane / 16, transposed by
    // ldmatrix, make the B operands of head-dim blocks db and db + 1.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      unsigned a[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int e = 2 * r;
        a[r] = Ops::pack(s[2 * kk + p_source_block(e)][p_source_element(e)],
                         s[2 * kk + p_source_block(e + 1)][p_source_element(e + 1)]);
      }
#pragma unroll
      for (int db = 0; db < D / 8; db += 2) {
        unsigned bv[4];
        ldmatrix<4, true>(bv, vs + Tile::chunk_offset(kk * 16 + lane % 8 + 8 * ((lane / 8) % 2), db + lane / 16));
        const unsigned first[2] = {bv[0], bv[1]}, second[2] = {bv[2], bv[3]};
        Ops::mma(o[db], a, first);
        Ops::mma(o[db + 1], a, second);
      }
    }
    __syncthreads();  // this stage is read; the next iteration's copies may overwrite it
    c0 = next;
  }
  wait_async_copies<0>();  // nothing left in flight when no tile was visible

  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const FragCoord at = mma_c_coord(lane, 2 * h);
    const std::int64_t row = r0 + warp * 16 + at.row;
    if (row >= r1) continue;
    const float inv = row_normaliser(row_max[h], row_sum[h], p.sinks, head);  // a row that saw no key outputs 0
    T* dst = out + (p.seq_offsets[b] + row) * p.out_row_stride + head * p.out_head_stride + at.col;
#pragma unroll
    for (int db = 0; db < D / 8; ++db)
      *reinterpret_cast<unsigned*>(dst + db * 8) = Ops::pack(o[db][2 * h] * inv, o[db][2 * h + 1] * inv);
  }
}

}  // namespace swa::dut::cuda
