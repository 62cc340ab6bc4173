#pragma once
// Split-K decode (flash-decoding): one query per sequence against the cache. CTA (split, kv head
// and a chunk of up to kHeadsPerCta of its q heads, sequence) folds its share of the slots into
// each head's partial softmax state; a second kernel merges the splits by log-sum-exp. Decode is
// bound by reading the cache, so every K/V row is loaded once for all the q heads that read it
// (GQA), in the widest loads its alignment allows, and each lane has several keys' rows in flight
// before it uses the first. It runs on CUDA cores for every dtype.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "dispatch.hpp"
#include "kernel_args.hpp"
#include "shared_memory.cuh"
#include "storage.cuh"

namespace swa::dut::cuda {

constexpr int kLanesPerKey = 16;  // a key's row is read by 16 lanes, head_size / 16 elements each
constexpr int kKeyGroups = 8;     // groups of kLanesPerKey lanes in a CTA
constexpr int kDecodeThreads = kLanesPerKey * kKeyGroups;
constexpr int kMergeThreads = 128;

// Keys whose K and V rows each lane loads before using any: kKvBytesPerLane bytes of each per lane
// (4 keys of fp16 at D 128). On an H200, 32 beat 16 and 64: 64 took 193 registers, so two CTAs per
// multiprocessor, 32 takes 164 (dut/cuda/README.md has the figures).
constexpr int kKvBytesPerLane = 32;
template <class Stored, int D>
SWA_HOST_DEVICE constexpr int decode_keys_per_group() {
  constexpr int bytes = D / kLanesPerKey * static_cast<int>(sizeof(Stored));
  return bytes >= kKvBytesPerLane ? 1 : kKvBytesPerLane / bytes > 8 ? 8 : kKvBytesPerLane / bytes;
}

// The launch's CTAs: (split, kv head x head chunk, sequence).
inline dim3 decode_grid(const AttnParams& p, int splits) {
  return dim3(static_cast<unsigned>(splits), static_cast<unsigned>(p.heads_kv * decode_head_chunks(p)),
              static_cast<unsigned>(p.batch));
}

// Partial state of one (sequence, q head, split): max and sum (base 2), then head_size outputs.
SWA_HOST_DEVICE inline float* partial_at(float* partials, const AttnParams& p, int splits, int b, int head, int split) {
  return partials + ((static_cast<std::int64_t>(b) * p.heads_q + head) * splits + split) * (p.head_size + 2);
}

// The split kernel's shared memory: each key group's (max, sum, output) per head before the CTA
// merges them.
template <int D>
struct DecodeShared {
  float max[kHeadsPerCta][kKeyGroups], sum[kHeadsPerCta][kKeyGroups];
  float out[kHeadsPerCta][kKeyGroups][D];
};

template <int Bytes>
struct WordOf;
template <>
struct WordOf<16> { using type = uint4; };
template <>
struct WordOf<8> { using type = uint2; };
template <>
struct WordOf<4> { using type = unsigned; };
template <>
struct WordOf<2> { using type = unsigned short; };
template <>
struct WordOf<1> { using type = unsigned char; };

// A lane's N consecutive stored elements of a K or V row in the widest words that divide N's bytes:
// rows start at multiples of head_size = 16 N elements of a cudaMalloc'd cache, and lane l's share
// at l N, so every share is aligned to such a word.
template <class Stored, int N>
__device__ inline void load_share(const Stored* src, Stored (&dst)[N]) {
  constexpr int bytes = N * static_cast<int>(sizeof(Stored));
#if defined(SWA_CUDA_HOST_EMULATION)
  std::memcpy(dst, src, bytes);
#else
  constexpr int word = bytes % 16 == 0 ? 16 : bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1;
  using Word = typename WordOf<word>::type;
  Word words[bytes / word];
#pragma unroll
  for (int w = 0; w < bytes / word; ++w) words[w] = reinterpret_cast<const Word*>(src)[w];
  memcpy(dst, words, bytes);
#endif
}

// One group's online-softmax state for the CTA's heads, in the lane's share of the output.
template <int Dims>
struct GroupState {
  float m[kHeadsPerCta], l[kHeadsPerCta], o[kHeadsPerCta][Dims];
};

// Folds the group's keys of `range` (slots group, group + 8, ... of each step) into `s`.
template <class Stored, int D>
__device__ inline void fold_keys(const AttnParams& p, const CacheView& cache, int b, int kv_head, std::int64_t i,
                                 KeyRange range, int group, int lane, const float (&q)[kHeadsPerCta][D / kLanesPerKey],
                                 GroupState<D / kLanesPerKey>& s) {
  constexpr int kDims = D / kLanesPerKey;
  constexpr int kKeys = decode_keys_per_group<Stored, D>();
  const float cap_log2 = cap_in_log2(p);
  const bool e4m3 = is_e4m3(p.kv_format);
  const Stored* cache_k = static_cast<const Stored*>(cache.k) + lane * kDims;
  const Stored* cache_v = static_cast<const Stored*>(cache.v) + lane * kDims;
  // Outside a paged cache, a slot's row is an affine function of the slot.
  const bool paged = cache.policy == CachePolicy::paged;
  const std::int64_t slot0_element = paged ? 0 : cache_element(cache, b, 0, kv_head);
  const std::int64_t slot_stride = static_cast<std::int64_t>(cache.heads_kv) * cache.head_size;
  // Every lane runs the same trip count, so the shuffles below always have the whole warp.
  for (std::int64_t base = range.first; base < range.end; base += kKeys * kKeyGroups) {
    Stored k_raw[kKeys][kDims], v_raw[kKeys][kDims];
    bool seen[kKeys];
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      const std::int64_t slot = base + j * kKeyGroups + group;
      const std::int64_t pos = slot < range.end ? cached_position(cache, b, slot, i) : -1;
      seen[j] = pos >= 0 && band_visible(p.band, i, pos);
      if (seen[j]) {
        const std::int64_t element = paged ? cache_element(cache, b, slot, kv_head) : slot0_element + slot * slot_stride;
        load_share(cache_k + element, k_raw[j]);
        load_share(cache_v + element, v_raw[j]);
      }
    }
    float score[kHeadsPerCta][kKeys];
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      float k[kDims];
#pragma unroll
      for (int d = 0; d < kDims; ++d) k[d] = seen[j] ? kv_value(k_raw[j][d], e4m3, p.k_descale) : 0.f;
#pragma unroll
      for (int h = 0; h < kHeadsPerCta; ++h) {
        float dot = 0.f;
#pragma unroll
        for (int d = 0; d < kDims; ++d) dot = fmaf(q[h][d], k[d], dot);
#pragma unroll
        for (int width = 1; width < kLanesPerKey; width *= 2) dot += __shfl_xor_sync(0xffffffffu, dot, width);
        score[h][j] = seen[j] ? soft_cap_log2(dot, cap_log2) : -INFINITY;
      }
    }
    // Scores become weights in place: 2^(score - new max), 0 for a key not seen.
#pragma unroll
    for (int h = 0; h < kHeadsPerCta; ++h) {
      float new_max = s.m[h];
#pragma unroll
      for (int j = 0; j < kKeys; ++j) new_max = fmaxf(new_max, score[h][j]);
      if (new_max == -INFINITY) continue;  // nothing seen yet; the weights below stay unused
      const float correction = exp2f(s.m[h] - new_max);  // m = -inf gives 0
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kKeys; ++j) {
        score[h][j] = exp2f(score[h][j] - new_max);
        sum += score[h][j];
      }
      s.l[h] = s.l[h] * correction + sum;
#pragma unroll
      for (int d = 0; d < kDims; ++d) s.o[h][d] *= correction;
      s.m[h] = new_max;
    }
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      if (!seen[j]) continue;  // then no head's max moved for it, and its V row was never loaded
      float v[kDims];
#pragma unroll
      for (int d = 0; d < kDims; ++d) v[d] = kv_value(v_raw[j][d], e4m3, p.v_descale);
#pragma unroll
      for (int h = 0; h < kHeadsPerCta; ++h)
#pragma unroll
        for (int d = 0; d < kDims; ++d) s.o[h][d] = fmaf(score[h][j], v[d], s.o[h][d]);
    }
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_split_kernel(AttnParams p, CacheView cache, const std::int64_t* q_pos, int splits, float* partials) {
  constexpr int kDims = D / kLanesPerKey;
  DecodeShared<D>& shared = *dynamic_shared<DecodeShared<D>>();
  const int split = blockIdx.x, b = blockIdx.z;
  const DecodeHeads served = decode_heads(p, static_cast<int>(blockIdx.y));
  const int kv_head = served.kv_head, first_head = served.first, heads = served.count;
  const std::int64_t i = q_pos[b];
  const int group = threadIdx.x / kLanesPerKey, lane = threadIdx.x % kLanesPerKey;
  const KeyRange range = split_range(decode_slot_range(cache.policy, cache.slots, p.band, i), splits, split);
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const float neg_inf = -INFINITY;

  float q[kHeadsPerCta][kDims];
  GroupState<kDims> s;
#pragma unroll
  for (int h = 0; h < kHeadsPerCta; ++h) {
    const T* q_row = static_cast<const T*>(p.q) + (p.seq_offsets[b] + i) * p.q_row_stride +
                     (first_head + h) * p.q_head_stride + lane * kDims;
#pragma unroll
    for (int d = 0; d < kDims; ++d) {
      q[h][d] = h < heads ? to_float(q_row[d]) * scale_log2 : 0.f;
      s.o[h][d] = 0.f;
    }
    s.m[h] = neg_inf;
    s.l[h] = 0.f;
  }
  if (is_fp8(p.kv_format)) fold_keys<std::uint8_t, D>(p, cache, b, kv_head, i, range, group, lane, q, s);
  else fold_keys<T, D>(p, cache, b, kv_head, i, range, group, lane, q, s);

#pragma unroll
  for (int h = 0; h < kHeadsPerCta; ++h) {
    if (lane == 0) {
      shared.max[h][group] = s.m[h];
      shared.sum[h][group] = s.l[h];
    }
#pragma unroll
    for (int d = 0; d < kDims; ++d) shared.out[h][group][lane * kDims + d] = s.o[h][d];
  }
  __syncthreads();
  for (int h = 0; h < heads; ++h) {
    float block_max = neg_inf;
    for (int g = 0; g < kKeyGroups; ++g) block_max = fmaxf(block_max, shared.max[h][g]);
    float* partial = partial_at(partials, p, splits, b, first_head + h, split);
    for (int d = threadIdx.x; d < D; d += kDecodeThreads) {
      float acc = 0.f;
      for (int g = 0; g < kKeyGroups; ++g)
        if (shared.max[h][g] != neg_inf) acc += shared.out[h][g][d] * exp2f(shared.max[h][g] - block_max);
      partial[2 + d] = acc;
    }
    if (threadIdx.x == 0) {
      float sum = 0.f;
      for (int g = 0; g < kKeyGroups; ++g)
        if (shared.max[h][g] != neg_inf) sum += shared.sum[h][g] * exp2f(shared.max[h][g] - block_max);
      partial[0] = block_max;
      partial[1] = sum;
    }
  }
}
// The merge kernel's shared memory: each split's weight 2^(max_s - max), and the merged sum.
struct DecodeMergeShared {
  float weight[kMaxDecodeSplits];
  float max, sum;
};

// CTA (q head, sequence): the splits' states merged by log-sum-exp, normalised, stored. Each thread
// owns columns of the partial state (column 1 the sum, 2.. the outputs) and adds its splits' terms
// in split order, so the result does not depend on timing; the splits' loads are independent, so
// many are in flight at once.
template <class T>
__global__ void __launch_bounds__(kMergeThreads)
    decode_merge_kernel(AttnParams p, const std::int64_t* q_pos, int splits, float* partials) {
  constexpr int kColumnsPerThread = (kMaxHeadSize + 1 + kMergeThreads - 1) / kMergeThreads;
  DecodeMergeShared& shared = *dynamic_shared<DecodeMergeShared>();
  const int head = blockIdx.x, b = blockIdx.y;
  const int stride = p.head_size + 2;
  const float* split0 = partial_at(partials, p, splits, b, head, 0);
  if (threadIdx.x < 32) {  // one warp: the splits' max, then their weights
    float m = -INFINITY;
    for (int s = threadIdx.x; s < splits; s += 32) m = fmaxf(m, split0[s * stride]);
    for (int width = 16; width > 0; width /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, width));
    for (int s = threadIdx.x; s < splits; s += 32) {
      const float split_max = split0[s * stride];
      shared.weight[s] = split_max == -INFINITY ? 0.f : exp2f(split_max - m);  // an empty split weighs 0
    }
    if (threadIdx.x == 0) shared.max = m;
  }
  __syncthreads();
  float acc[kColumnsPerThread];
#pragma unroll
  for (int k = 0; k < kColumnsPerThread; ++k) {
    const int column = 1 + threadIdx.x + k * kMergeThreads;
    acc[k] = 0.f;
    if (column >= stride) continue;
#pragma unroll 8
    for (int s = 0; s < splits; ++s) acc[k] += split0[s * stride + column] * shared.weight[s];
    if (column == 1) shared.sum = acc[k];
  }
  __syncthreads();
  const float inv = row_normaliser(shared.max, shared.sum, p.sinks, head);  // a query that saw no key outputs 0
  T* out = static_cast<T*>(p.out) + (p.seq_offsets[b] + q_pos[b]) * p.out_row_stride + head * p.out_head_stride;
#pragma unroll
  for (int k = 0; k < kColumnsPerThread; ++k) {
    const int column = 1 + threadIdx.x + k * kMergeThreads;
    if (column >= 2 && column < stride) out[column - 2] = from_float<T>(acc[k] * inv);
  }
}

}  // namespace swa::dut::cuda
