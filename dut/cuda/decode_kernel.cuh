#pragma once
// Split-K decode (flash-decoding): one query per sequence against the cache. CTA (split, kv head
// and a chunk of up to kHeadsPerCta of its q heads, sequence) folds its share of the slots into
// each head's partial softmax state; the last CTA of its heads to finish merges the splits by
// log-sum-exp (decode_merge.cuh). fp16/bf16
// caches at head sizes up to 128 fold on tensor cores (decode_mma_kernel.cuh); fp32 and FP8 caches
// and larger head sizes on the CUDA cores, here: warp w serves q head first + w, lane j scores key
// j of the tile over the whole head size (no shuffle reductions), and in P.V each lane owns pairs
// of output columns.
#include <cmath>
#include <cstdint>
#include <cstring>

#include <type_traits>

#include "decode_fresh_row.cuh"
#include "decode_merge.cuh"
#include "decode_mma_kernel.cuh"
#include "decode_tiles.cuh"
#include "dispatch.hpp"
#include "kernel_args.hpp"
#include "shared_memory.cuh"
#include "storage.cuh"

namespace swa::dut::cuda {

// The CUDA-core kernel's layout: the CTA's scaled queries in fp32, then tiles of kDecodeTileKeys
// keys (one per lane while scoring).
constexpr int kDecodeTileKeys = 32;
template <class Stored, int D>
using SimtDecodeLayout = DecodeLayout<Stored, D, kDecodeTileKeys, kHeadsPerCta * D * static_cast<int>(sizeof(float))>;

// The CUDA-core split kernel's dynamic shared memory for a run's storage type T and KV format.
template <class T, int D>
constexpr int simt_decode_shared_bytes(bool fp8_cache) {
  return fp8_cache ? SimtDecodeLayout<std::uint8_t, D>::kSharedBytes : SimtDecodeLayout<T, D>::kSharedBytes;
}

// CTAs per multiprocessor the register allocation must allow (__launch_bounds__; 4 gives ~100
// registers, no spills). On an H100, 5 or 6 were no faster (dut/cuda/README.md).
constexpr int kDecodeMinCtasPerSm = 4;

// A stored element from the low sizeof(Stored) bytes of `bits`.
template <class Stored>
__device__ inline Stored stored_from_bits(unsigned bits);
template <>
__device__ inline float stored_from_bits<float>(unsigned bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
template <>
__device__ inline __half stored_from_bits<__half>(unsigned bits) {
  __half_raw raw;
  raw.x = static_cast<unsigned short>(bits);
  return __half(raw);
}
template <>
__device__ inline __nv_bfloat16 stored_from_bits<__nv_bfloat16>(unsigned bits) {
  __nv_bfloat16_raw raw;
  raw.x = static_cast<unsigned short>(bits);
  return __nv_bfloat16(raw);
}
template <>
__device__ inline std::uint8_t stored_from_bits<std::uint8_t>(unsigned bits) {
  return static_cast<std::uint8_t>(bits);
}

// Element e of the stored elements packed in 32-bit words (e a constant after unrolling).
template <class Stored>
__device__ inline Stored element_of(const unsigned* words, int e) {
  constexpr int size = static_cast<int>(sizeof(Stored));
  return stored_from_bits<Stored>(words[e * size / 4] >> (e * size % 4 * 8));
}

// One q head's online-softmax state, held by its warp: the max and sum (the same in every lane)
// and the lane's output columns, pairs 2 (lane + 32 r).
template <int D>
struct HeadState {
  static constexpr int kPairs = (D / 2 + 31) / 32;
  float m = -INFINITY, l = 0.f;
  float o[kPairs][2] = {};
};

// Folds the keys of one tile in shared memory (K rows at `tile`, V rows kTileBytes on) into the
// warp's head: lane j scores slot first + j against the head's scaled query `q`.
template <class Stored, int D>
__device__ inline void fold_tile(const AttnParams& p, const CacheView& cache, int b, std::int64_t i, std::int64_t first,
                                 std::int64_t end, const unsigned char* tile, const float* q, HeadState<D>& s) {
  using L = SimtDecodeLayout<Stored, D>;
  constexpr int kPerChunk = 16 / static_cast<int>(sizeof(Stored));
  const int lane = static_cast<int>(threadIdx.x % 32);
  const bool e4m3 = is_e4m3(p.kv_format);
  const bool seen = decode_sees(p, cache, b, i, first + lane, end);
  const unsigned seen_keys = __ballot_sync(0xffffffffu, seen);
  if (seen_keys == 0) return;

  // Independent partial sums, one per element of a 16-byte piece, so the FMAs do not wait on each other.
  float partial[kPerChunk] = {};
  const unsigned char* k_row = tile + lane * L::kPitch;
#pragma unroll 4
  for (int chunk = 0; chunk < L::kChunksPerRow; ++chunk) {
    const uint4 bits = *reinterpret_cast<const uint4*>(k_row + chunk * 16);
    const unsigned words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
    for (int e = 0; e < kPerChunk; ++e)
      partial[e] = fmaf(q[chunk * kPerChunk + e], kv_value(element_of<Stored>(words, e), e4m3, p.k_descale), partial[e]);
  }
  float dot = 0.f;
#pragma unroll
  for (int e = 0; e < kPerChunk; ++e) dot += partial[e];
  const float score = seen ? soft_cap_log2(dot, cap_in_log2(p)) : -INFINITY;

  float tile_max = score;
#pragma unroll
  for (int width = 16; width > 0; width /= 2) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, width));
  const float new_max = fmaxf(s.m, tile_max);
  const float correction = exp2f(s.m - new_max);  // m = -inf gives 0
  const float weight = seen ? exp2f(score - new_max) : 0.f;
  float sum = weight;
#pragma unroll
  for (int width = 16; width > 0; width /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, width);
  s.l = s.l * correction + sum;
  s.m = new_max;
#pragma unroll
  for (int r = 0; r < HeadState<D>::kPairs; ++r) s.o[r][0] *= correction, s.o[r][1] *= correction;

  // P.V over the seen keys only: a slot not seen may hold anything, NaN included.
  const unsigned char* v_tile = tile + L::kTileBytes;
  for (int key = 0; key < kDecodeTileKeys; ++key) {
    const float w = __shfl_sync(0xffffffffu, weight, key);
    if ((seen_keys >> key & 1u) == 0) continue;  // the same in every lane
    const unsigned char* v_row = v_tile + key * L::kPitch;
#pragma unroll
    for (int r = 0; r < HeadState<D>::kPairs; ++r) {
      const int column = 2 * (lane + 32 * r);
      if (column >= D) break;
      unsigned words[2];  // the pair's bytes, in one load of its size
      const unsigned char* at = v_row + column * sizeof(Stored);
      if constexpr (sizeof(Stored) == 4) {
        const uint2 two = *reinterpret_cast<const uint2*>(at);
        words[0] = two.x, words[1] = two.y;
      } else if constexpr (sizeof(Stored) == 2) {
        words[0] = *reinterpret_cast<const unsigned*>(at);
      } else {
        words[0] = *reinterpret_cast<const unsigned short*>(at);
      }
      s.o[r][0] = fmaf(w, kv_value(element_of<Stored>(words, 0), e4m3, p.v_descale), s.o[r][0]);
      s.o[r][1] = fmaf(w, kv_value(element_of<Stored>(words, 1), e4m3, p.v_descale), s.o[r][1]);
    }
  }
}

// Folds the split's tiles (`range`, split `split` of `decode_range`) into the warp's head (warps
// past the CTA's heads only help copy), with the step's new row in its slot, then stores that row
// in the cache if this CTA owns it (decode_fresh_row.cuh).
template <class Stored, class T, int D>
__device__ inline void fold_range(const AttnParams& p, const CacheView& cache, int b, int kv_head, std::int64_t i,
                                  KeyRange decode_range, KeyRange range, int split, unsigned char* stages,
                                  const float* q, bool serves, HeadState<D>& s) {
  const auto fresh = FreshRow<Stored, D>::template load<T>(p, cache, b, kv_head, i);
  stream_tiles<Stored, SimtDecodeLayout<Stored, D>>(cache, b, kv_head, range, fresh, stages,
                                                    [&](std::int64_t first, const unsigned char* tile) {
                                                      if (serves) fold_tile<Stored, D>(p, cache, b, i, first, range.end, tile, q, s);
                                                    });
  if (fresh.stored_by(p, decode_range, range, split)) fresh.store(cache, b, kv_head);
}

template <class T, int D>
__global__ void __launch_bounds__(kDecodeThreads, kDecodeMinCtasPerSm)
    decode_split_kernel(AttnParams p, CacheView cache, const std::int64_t* q_pos, int splits, float* partials,
                        unsigned* arrivals) {
  float* q = dynamic_shared<float>();  // [kHeadsPerCta][D], then the tiles
  unsigned char* stages = reinterpret_cast<unsigned char*>(q + kHeadsPerCta * D);
  const int split = blockIdx.x, b = blockIdx.z;
  const DecodeHeads served = decode_heads(p, static_cast<int>(blockIdx.y));
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t i = q_pos[b];
  const KeyRange decode_range = decode_slot_range(cache.policy, cache.slots, p.band, i);
  const KeyRange range = split_range(decode_range, splits, split);
  const float scale_log2 = p.scale * 1.4426950408889634f;

  for (int e = static_cast<int>(threadIdx.x); e < kHeadsPerCta * D; e += kDecodeThreads) {
    const int h = e / D, d = e % D;
    const T* q_row = static_cast<const T*>(p.q) + (p.seq_offsets[b] + i) * p.q_row_stride +
                     (served.first + h) * p.q_head_stride;
    q[e] = h < served.count ? to_float(q_row[d]) * scale_log2 : 0.f;
  }  // the first tile's barrier publishes these
  const bool serves = warp < served.count;
  HeadState<D> s;
  if (is_fp8(p.kv_format))
    fold_range<std::uint8_t, T, D>(p, cache, b, served.kv_head, i, decode_range, range, split, stages, q + warp * D, serves, s);
  else
    fold_range<T, T, D>(p, cache, b, served.kv_head, i, decode_range, range, split, stages, q + warp * D, serves, s);
  if (serves) {
    float* partial = partial_at(partials, p, splits, b, served.first + warp, split);
    if (lane == 0) {
      partial[0] = s.m;
      partial[1] = s.l;
    }
#pragma unroll
    for (int r = 0; r < HeadState<D>::kPairs; ++r) {
      const int column = 2 * (lane + 32 * r);
      if (column >= D) break;
      partial[2 + column] = s.o[r][0];
      partial[3 + column] = s.o[r][1];
    }
  }
  static_assert(kDecodeMergeScratchBytes <= SimtDecodeLayout<std::uint8_t, D>::kStageBytes);
  merge_if_last<T>(p, q_pos, splits, partials, arrivals, served, b, stages);
}

}  // namespace swa::dut::cuda
