#pragma once
// Split-K decode (flash-decoding): one query per sequence against the cache. CTA (split, q head,
// sequence) folds its share of the slots into a partial softmax state, 16 keys in flight with 8
// lanes per key; a second kernel merges the splits by log-sum-exp. Decode is bound by reading the
// cache, so it runs on CUDA cores for every dtype.
#include <cmath>
#include <cstdint>

#include "kernel_args.hpp"
#include "shared_memory.cuh"
#include "storage.cuh"

namespace swa::dut::cuda {

constexpr int kLanesPerKey = 8;
constexpr int kKeysInFlight = 16;
constexpr int kDecodeThreads = kLanesPerKey * kKeysInFlight;
constexpr int kMergeThreads = 128;

// Partial state of one (sequence, q head, split): max and sum (base 2), then head_size outputs.
SWA_HOST_DEVICE inline float* partial_at(float* partials, const AttnParams& p, int splits, int b, int head, int split) {
  return partials + ((static_cast<std::int64_t>(b) * p.heads_q + head) * splits + split) * (p.head_size + 2);
}

// The split kernel's shared memory: each key group's (max, sum, output) before the CTA merges them.
template <int D>
struct DecodeShared {
  float max[kKeysInFlight], sum[kKeysInFlight];
  float out[kKeysInFlight][D];
};

template <class T, int D>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_split_kernel(AttnParams p, CacheView cache, const std::int64_t* q_pos, int splits, float* partials) {
  constexpr int kDims = D / kLanesPerKey;
  DecodeShared<D>& shared = *dynamic_shared<DecodeShared<D>>();
  float* group_max = shared.max;
  float* group_sum = shared.sum;
  auto& group_out = shared.out;
  const int split = blockIdx.x, head = blockIdx.y, b = blockIdx.z;
  const int kv_head = kv_head_for(head, p.heads_q, p.heads_kv);
  const std::int64_t i = q_pos[b];
  const int group = threadIdx.x / kLanesPerKey, lane = threadIdx.x % kLanesPerKey;
  const KeyRange range = split_range(decode_slot_range(cache.policy, cache.slots, p.band, i), splits, split);
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const float cap_log2 = cap_in_log2(p);
  const float neg_inf = -INFINITY;

  const T* q_row = static_cast<const T*>(p.q) + (p.seq_offsets[b] + i) * p.q_row_stride + head * p.q_head_stride +
                   lane * kDims;
  float qr[kDims], o[kDims];
#pragma unroll
  for (int d = 0; d < kDims; ++d) {
    qr[d] = to_float(q_row[d]) * scale_log2;
    o[d] = 0.f;
  }
  float m = neg_inf, l = 0.f;
  const T* cache_k = static_cast<const T*>(cache.k);
  const T* cache_v = static_cast<const T*>(cache.v);
  // Every lane runs the same trip count, so the shuffles below always have the whole warp.
  for (std::int64_t base = range.first; base < range.end; base += kKeysInFlight) {
    const std::int64_t slot = base + group;
    const std::int64_t pos = slot < range.end ? cached_position(cache, b, slot, i) : -1;
    const bool seen = pos >= 0 && band_visible(p.band, i, pos);
    const std::int64_t element = seen ? cache_element(cache, b, slot, kv_head) + lane * kDims : 0;
    float dot = 0.f;
    if (seen)
#pragma unroll
      for (int d = 0; d < kDims; ++d) dot = fmaf(qr[d], cached_kv<T>(p, cache_k, element + d, p.k_descale), dot);
    dot += __shfl_xor_sync(0xffffffffu, dot, 1);
    dot += __shfl_xor_sync(0xffffffffu, dot, 2);
    dot += __shfl_xor_sync(0xffffffffu, dot, 4);
    if (seen) {
      dot = soft_cap_log2(dot, cap_log2);
      const float new_max = fmaxf(m, dot);
      const float correction = exp2f(m - new_max);  // m = -inf gives 0
      const float pj = exp2f(dot - new_max);
      l = l * correction + pj;
#pragma unroll
      for (int d = 0; d < kDims; ++d) o[d] = fmaf(pj, cached_kv<T>(p, cache_v, element + d, p.v_descale), o[d] * correction);
      m = new_max;
    }
  }

  if (lane == 0) {
    group_max[group] = m;
    group_sum[group] = l;
  }
#pragma unroll
  for (int d = 0; d < kDims; ++d) group_out[group][lane * kDims + d] = o[d];
  __syncthreads();
  float block_max = neg_inf;
  for (int g = 0; g < kKeysInFlight; ++g) block_max = fmaxf(block_max, group_max[g]);
  float* partial = partial_at(partials, p, splits, b, head, split);
  for (int d = threadIdx.x; d < D; d += kDecodeThreads) {
    float acc = 0.f;
    for (int g = 0; g < kKeysInFlight; ++g)
      if (group_max[g] != neg_inf) acc += group_out[g][d] * exp2f(group_max[g] - block_max);
    partial[2 + d] = acc;
  }
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int g = 0; g < kKeysInFlight; ++g)
      if (group_max[g] != neg_inf) sum += group_sum[g] * exp2f(group_max[g] - block_max);
    partial[0] = block_max;
    partial[1] = sum;
  }
}

// CTA (q head, sequence): the splits' states merged in split order, normalised, stored.
template <class T>
__global__ void __launch_bounds__(kMergeThreads)
    decode_merge_kernel(AttnParams p, const std::int64_t* q_pos, int splits, float* partials) {
  const int head = blockIdx.x, b = blockIdx.y;
  float m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, partial_at(partials, p, splits, b, head, s)[0]);
  float sum = 0.f;
  for (int s = 0; s < splits; ++s) {
    const float* part = partial_at(partials, p, splits, b, head, s);
    if (part[0] != -INFINITY) sum += part[1] * exp2f(part[0] - m);
  }
  const float inv = row_normaliser(m, sum, p.sinks, head);  // a query that saw no key outputs 0
  T* out = static_cast<T*>(p.out) + (p.seq_offsets[b] + q_pos[b]) * p.out_row_stride + head * p.out_head_stride;
  for (int d = threadIdx.x; d < p.head_size; d += kMergeThreads) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) {
      const float* part = partial_at(partials, p, splits, b, head, s);
      if (part[0] != -INFINITY) acc += part[2 + d] * exp2f(part[0] - m);
    }
    out[d] = from_float<T>(acc * inv);
  }
}

}  // namespace swa::dut::cuda
