#pragma once
// fp32 prefill on CUDA cores, FlashAttention-style: a CTA of 256 threads serves 64 query rows of
// one (sequence, q head), four lanes per row, each lane holding a quarter of the row's q and o in
// registers (dims lane, lane + 4, ...). Key tiles of 32 outside the band are never loaded.
#include <cmath>
#include <cstdint>

#include "kernel_args.hpp"
#include "launch.hpp"
#include "shared_memory.cuh"
#include "storage.cuh"

namespace swa::dut::cuda {

template <int D>
struct SimtTile {
  static constexpr int kRows = prefill_tile_rows(false, D);
  static constexpr int kLanesPerRow = 4;
  static constexpr int kThreads = kRows * kLanesPerRow;
  static constexpr int kKeys = 32;
  static constexpr int kDimsPerLane = D / kLanesPerRow;
  static constexpr int kSmemBytes = static_cast<int>(2 * kKeys * D * sizeof(float));
  static_assert(D % 4 == 0);
};

template <int D>
__global__ void __launch_bounds__(SimtTile<D>::kThreads) prefill_simt_kernel(AttnParams p, RowWork work, CacheView cache) {
  using Tile = SimtTile<D>;
  constexpr int kKeys = Tile::kKeys, kDims = Tile::kDimsPerLane;
  float* ks = dynamic_shared<float>();  // [kKeys][D]
  float* vs = ks + kKeys * D;                      // [kKeys][D]

  const QueryTile t = query_tile(p, work, static_cast<std::int32_t>(blockIdx.x), blockIdx.y, Tile::kRows);
  const int b = t.b, head = t.head, kv_head = t.kv_head;
  const std::int64_t r0 = t.r0, r1 = t.r1, fresh_begin = t.fresh_begin, seq_len = t.seq_len;
  const KeyRange keys = t.keys;
  const Visibility vis(p);
  const float* k = static_cast<const float*>(p.k);
  const float* v = static_cast<const float*>(p.v);
  const float* cache_k = static_cast<const float*>(cache.k);
  const float* cache_v = static_cast<const float*>(cache.v);

  const int part = threadIdx.x % Tile::kLanesPerRow;
  const std::int64_t row = r0 + threadIdx.x / Tile::kLanesPerRow;
  const bool active = row < r1;
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const float cap_log2 = cap_in_log2(p);
  const float neg_inf = -INFINITY;
  float qr[kDims], o[kDims];
  const float* q_row = static_cast<const float*>(p.q) + (p.seq_offsets[b] + row) * p.q_row_stride + head * p.q_head_stride;
#pragma unroll
  for (int i = 0; i < kDims; ++i) {
    qr[i] = active ? q_row[part + 4 * i] * scale_log2 : 0.f;
    o[i] = 0.f;
  }
  float row_max = neg_inf, row_sum = 0.f;

  for (std::int64_t c0 = keys.first; c0 < keys.end; c0 += kKeys) {
    const std::int64_t c1 = c0 + kKeys < keys.end ? c0 + kKeys : keys.end;
    const TileClass cls = vis.classify(r0, r1, c0, c1);
    if (cls == TileClass::hidden) continue;  // uniform across the CTA
    __syncthreads();
    for (int i = threadIdx.x; i < kKeys * D / 4; i += Tile::kThreads) {
      const int j = i / (D / 4), col = (i % (D / 4)) * 4;
      float4 k_vec = make_float4(0.f, 0.f, 0.f, 0.f), v_vec = k_vec;
      if (c0 + j < c1) {
        const KeyLocation at = locate_key(p, cache, fresh_begin, b, c0 + j, kv_head);
        if (!is_fp8(p.kv_format)) {
          k_vec = *reinterpret_cast<const float4*>((at.in_cache ? cache_k : k) + at.k_element + col);
          v_vec = *reinterpret_cast<const float4*>((at.in_cache ? cache_v : v) + at.v_element + col);
        } else {
          float k_elems[4], v_elems[4];
          load_fp8_kv(p, at.in_cache, k, cache.k, at.k_element + col, p.k_descale, k_elems);
          load_fp8_kv(p, at.in_cache, v, cache.v, at.v_element + col, p.v_descale, v_elems);
          k_vec = make_float4(k_elems[0], k_elems[1], k_elems[2], k_elems[3]);
          v_vec = make_float4(v_elems[0], v_elems[1], v_elems[2], v_elems[3]);
        }
      }
      *reinterpret_cast<float4*>(ks + j * D + col) = k_vec;
      *reinterpret_cast<float4*>(vs + j * D + col) = v_vec;
    }
    __syncthreads();

    float s[kKeys];
    float tile_max = neg_inf;
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      float dot = 0.f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) dot = fmaf(qr[i], ks[j * D + part + 4 * i], dot);
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      const std::int64_t col = c0 + j;
      const bool seen = col < c1 && (cls == TileClass::full || vis.visible_in_sequence(row, col, seq_len));
      s[j] = seen ? soft_cap_log2(dot, cap_log2) : neg_inf;  // capped before the softmax, as the golden
      tile_max = fmaxf(tile_max, s[j]);
    }
    const float new_max = fmaxf(row_max, tile_max);
    const float shift = new_max == neg_inf ? 0.f : new_max;
    const float correction = row_max == neg_inf ? 0.f : exp2f(row_max - shift);
    row_max = new_max;
    row_sum *= correction;
#pragma unroll
    for (int i = 0; i < kDims; ++i) o[i] *= correction;
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      const float pj = exp2f(s[j] - shift);
      row_sum += pj;
#pragma unroll
      for (int i = 0; i < kDims; ++i) o[i] = fmaf(pj, vs[j * D + part + 4 * i], o[i]);
    }
  }

  if (!active) return;
  const float inv = row_normaliser(row_max, row_sum, p.sinks, head);  // a row that saw no key outputs 0
  float* out = static_cast<float*>(p.out) + (p.seq_offsets[b] + row) * p.out_row_stride + head * p.out_head_stride;
#pragma unroll
  for (int i = 0; i < kDims; ++i) out[part + 4 * i] = o[i] * inv;
}

}  // namespace swa::dut::cuda
