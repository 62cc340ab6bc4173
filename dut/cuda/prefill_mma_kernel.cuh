#pragma once
// FlashAttention-2-style prefill on tensor cores (mma.sync.m16n8k16, fp16/bf16 in, fp32
// accumulate). A CTA of 4 warps serves 64 query rows of one (sequence, q head) of the packed
// ragged batch; each warp owns 16 rows and keeps S and O in registers. Only key tiles that
// intersect the band are loaded; keys below the call's first row come from the KV cache.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernel_args.hpp"
#include "launch.hpp"
#include "mma_fragment.hpp"
#include "shared_memory.cuh"
#include "storage.cuh"
#include "tensor_core_ops.cuh"

namespace swa::dut::cuda {

template <class T, int D>
struct MmaTile {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;
  static constexpr int kKeys = D <= 128 ? 64 : 32;  // keeps S + O registers and shared memory in bounds
  static constexpr int kRowStride = D + 8;          // Q and K rows, padded against bank conflicts
  static constexpr int kKeyStride = kKeys + 8;      // rows of the transposed V tile
  static constexpr int kChunks = D / 8;             // 16-byte chunks per row
  static constexpr int kSmemBytes = static_cast<int>(((kRows + kKeys) * kRowStride + D * kKeyStride) * sizeof(T));
  static_assert(kRows == kPrefillTileRows);
  static_assert(D % 16 == 0 && kKeys % 16 == 0);
};

template <class T, int D>
__global__ void __launch_bounds__(MmaTile<T, D>::kThreads)
    prefill_mma_kernel(AttnParams p, RowWork work, CacheView cache) {
  using Tile = MmaTile<T, D>;
  using Ops = TensorCoreOps<T>;
  constexpr int kKeys = Tile::kKeys, kRS = Tile::kRowStride, kKS = Tile::kKeyStride, kChunks = Tile::kChunks;
  T* qs = dynamic_shared<T>();  // [kRows][kRS]
  T* ks = qs + Tile::kRows * kRS;             // [kKeys][kRS]
  T* vt = ks + kKeys * kRS;                   // [D][kKS], V transposed

  const QueryTile t = query_tile(p, work, static_cast<std::int32_t>(blockIdx.x), blockIdx.y, Tile::kRows);
  const int b = t.b, head = t.head, kv_head = t.kv_head;
  const std::int64_t r0 = t.r0, r1 = t.r1, fresh_begin = t.fresh_begin, seq_len = t.seq_len;
  const KeyRange keys = t.keys;
  const Visibility vis(p);

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const T* cache_k = static_cast<const T*>(cache.k);
  const T* cache_v = static_cast<const T*>(cache.v);

  for (int i = threadIdx.x; i < Tile::kRows * kChunks; i += Tile::kThreads) {
    const int r = i / kChunks, col = (i % kChunks) * 8;
    uint4 chunk = make_uint4(0, 0, 0, 0);
    if (r0 + r < r1)
      chunk = *reinterpret_cast<const uint4*>(q + (p.seq_offsets[b] + r0 + r) * p.q_row_stride +
                                              head * p.q_head_stride + col);
    *reinterpret_cast<uint4*>(qs + r * kRS + col) = chunk;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const float cap_log2 = cap_in_log2(p);
  const float neg_inf = -INFINITY;
  const T* q_warp = qs + warp * 16 * kRS;
  float o[D / 8][4];
#pragma unroll
  for (int db = 0; db < D / 8; ++db)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[db][e] = 0.f;
  // Row statistics of the two rows this lane holds (accumulator rows g and g + 8); row_sum is this
  // lane's share until the final reduction across the four lanes of a row.
  float row_max[2] = {neg_inf, neg_inf}, row_sum[2] = {0.f, 0.f};

  for (std::int64_t c0 = keys.first; c0 < keys.end; c0 += kKeys) {
    const std::int64_t c1 = c0 + kKeys < keys.end ? c0 + kKeys : keys.end;
    const TileClass cls = vis.classify(r0, r1, c0, c1);
    if (cls == TileClass::hidden) continue;  // uniform across the CTA
    __syncthreads();                         // Q stored; the previous K/V tile consumed
    for (int i = threadIdx.x; i < kKeys * kChunks; i += Tile::kThreads) {
      const int j = i / kChunks, col = (i % kChunks) * 8;
      uint4 k_chunk = make_uint4(0, 0, 0, 0), v_chunk = make_uint4(0, 0, 0, 0);  // zero V: 0 * garbage may be NaN
      if (c0 + j < c1) {
        const KeyLocation at = locate_key(p, cache, fresh_begin, b, c0 + j, kv_head);
        if (!is_fp8(p.kv_format)) {
          k_chunk = *reinterpret_cast<const uint4*>((at.in_cache ? cache_k : k) + at.k_element + col);
          v_chunk = *reinterpret_cast<const uint4*>((at.in_cache ? cache_v : v) + at.v_element + col);
        } else {
          T k_elems[8], v_elems[8];
          load_fp8_kv(p, at.in_cache, k, cache.k, at.k_element + col, p.k_descale, k_elems);
          load_fp8_kv(p, at.in_cache, v, cache.v, at.v_element + col, p.v_descale, v_elems);
          memcpy(&k_chunk, static_cast<const void*>(k_elems), sizeof k_chunk);
          memcpy(&v_chunk, static_cast<const void*>(v_elems), sizeof v_chunk);
        }
      }
      *reinterpret_cast<uint4*>(ks + j * kRS + col) = k_chunk;
      T v_elems[8];
      memcpy(static_cast<void*>(v_elems), &v_chunk, sizeof v_chunk);  // a pointer cast would break strict aliasing
#pragma unroll
      for (int x = 0; x < 8; ++x) vt[(col + x) * kKS + j] = v_elems[x];
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows.
    float s[kKeys / 8][4];
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nb][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned a[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const FragCoord at = mma_a_coord(lane, 2 * r);
        a[r] = *reinterpret_cast<const unsigned*>(q_warp + at.row * kRS + kk * 16 + at.col);
      }
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; ++nb) {
        unsigned bk[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const FragCoord at = mma_b_coord(lane, 2 * r);  // row: head dim, col: key
          bk[r] = *reinterpret_cast<const unsigned*>(ks + (nb * 8 + at.col) * kRS + kk * 16 + at.row);
        }
        Ops::mma(s[nb], a, bk);
      }
    }

    // Mask, then the online softmax in base 2.
    const bool ragged = c1 - c0 < kKeys;
    float tile_max[2] = {neg_inf, neg_inf};
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
        tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
      }
    float shift[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float new_max = fmaxf(row_max[h], tile_max[h]);
      shift[h] = new_max == neg_inf ? 0.f : new_max;  // a row with nothing visible yet keeps exp(-inf) = 0
      const float correction = row_max[h] == neg_inf ? 0.f : exp2f(row_max[h] - shift[h]);
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
        const float pe = exp2f(s[nb][e] - shift[e / 2]);
        s[nb][e] = pe;
        row_sum[e / 2] += pe;
      }

    // O += P V: the S accumulators of n8 blocks 2kk and 2kk+1 are the A operand of k16 block kk.
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
      for (int db = 0; db < D / 8; ++db) {
        unsigned bv[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const FragCoord at = mma_b_coord(lane, 2 * r);  // row: key, col: head dim
          bv[r] = *reinterpret_cast<const unsigned*>(vt + (db * 8 + at.col) * kKS + kk * 16 + at.row);
        }
        Ops::mma(o[db], a, bv);
      }
    }
  }

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
