#pragma once
// Split-K decode (flash-decoding): one query per sequence against the cache. CTA (split, kv head
// and a chunk of up to kHeadsPerCta of its q heads, sequence) folds its share of the slots into
// each head's partial softmax state; a second kernel merges the splits by log-sum-exp. Decode is
// bound by reading the cache: the CTA streams tiles of kDecodeTileKeys K and V rows into shared
// memory with asynchronous copies, the next tile's in flight while it computes on this one, so the
// bytes in flight cost no registers. Each K/V row is read from memory once for all the CTA's q
// heads (GQA). Warp w serves q head first + w: lane j scores key j of the tile over the whole head
// size (no shuffle reductions), and in P.V each lane owns pairs of output columns. It runs on CUDA
// cores for every dtype.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "async_copy.cuh"
#include "dispatch.hpp"
#include "kernel_args.hpp"
#include "shared_memory.cuh"
#include "storage.cuh"

namespace swa::dut::cuda {

constexpr int kDecodeThreads = 32 * kHeadsPerCta;
constexpr int kDecodeTileKeys = 32;  // one key per lane while scoring
constexpr int kMergeThreads = 128;
// Shared memory a decode CTA may take: within what sm_86/sm_89 allow one CTA (99 KB), so the
// layouts below fit every architecture the library is built for (sm_80+).
constexpr int kDecodeSharedBudget = 96 * 1024;
// Tiles in shared memory at once, and the CTAs per multiprocessor the register allocation must
// allow (__launch_bounds__; 4 gives ~100 registers, no spills). On an H100, 3 stages, or 5 or 6 CTAs
// per multiprocessor, were no faster than these (dut/cuda/README.md, "Measured on a GPU").
constexpr int kDecodeStages = 2;
constexpr int kDecodeMinCtasPerSm = 4;

// Where a decode CTA's shared memory holds what, for cache elements of type Stored (the dtype, or
// one-byte FP8 codes): the CTA's scaled queries in fp32, then kStages tiles, each kDecodeTileKeys
// K rows then as many V rows. Rows are kPitch bytes apart, an odd number of 16-byte words, so the 8
// lanes of a quarter warp that read 16 bytes of 8 different rows at one column offset meet 8
// different groups of 4 banks.
template <class Stored, int D>
struct DecodeLayout {
  static constexpr int kRowBytes = D * static_cast<int>(sizeof(Stored));
  static_assert(kRowBytes % 16 == 0, "a row is copied in 16-byte pieces");
  static constexpr int kChunksPerRow = kRowBytes / 16;
  static constexpr int kPitch = kChunksPerRow % 2 == 1 ? kRowBytes : kRowBytes + 16;
  static constexpr int kTileBytes = kDecodeTileKeys * kPitch;  // K, then V at + kTileBytes
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kQueryBytes = kHeadsPerCta * D * static_cast<int>(sizeof(float));
  // kDecodeStages stages (tiles copied while another is read) where they fit, else fewer (fp32, D >= 192).
  static constexpr int kStages = kQueryBytes + kDecodeStages * kStageBytes <= kDecodeSharedBudget ? kDecodeStages
                                 : kQueryBytes + 2 * kStageBytes <= kDecodeSharedBudget           ? 2
                                                                                                  : 1;
  static constexpr int kSharedBytes = kQueryBytes + kStages * kStageBytes;
  static_assert(kSharedBytes <= kDecodeSharedBudget, "a decode CTA's tiles exceed the shared-memory budget");
};

// The split kernel's dynamic shared memory for a run's dtype T and KV format.
template <class T, int D>
constexpr int decode_shared_bytes(bool fp8_cache) {
  return fp8_cache ? DecodeLayout<std::uint8_t, D>::kSharedBytes : DecodeLayout<T, D>::kSharedBytes;
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

// Starts the copies of the K and V rows of slots [first, first + kDecodeTileKeys) into `stage`,
// every thread of the CTA a share of the 16-byte pieces. Slots past the range's end, and paged
// slots whose page is not held, are zero-filled without a read.
template <class Stored, int D>
__device__ inline void copy_tile_async(const CacheView& cache, int b, int kv_head, std::int64_t first, std::int64_t end,
                                       unsigned char* stage) {
  using L = DecodeLayout<Stored, D>;
  const auto* k = static_cast<const unsigned char*>(cache.k);
  const auto* v = static_cast<const unsigned char*>(cache.v);
  for (int piece = static_cast<int>(threadIdx.x); piece < kDecodeTileKeys * L::kChunksPerRow; piece += kDecodeThreads) {
    const int key = piece / L::kChunksPerRow, chunk = piece % L::kChunksPerRow;
    const std::int64_t slot = first + key;
    const bool held = slot < end && (cache.policy != CachePolicy::paged || cache_page(cache, b, slot) >= 0);
    const std::int64_t byte =
        held ? cache_element(cache, b, slot, kv_head) * static_cast<std::int64_t>(sizeof(Stored)) + chunk * 16 : 0;
    unsigned char* row = stage + key * L::kPitch + chunk * 16;
    copy_16_async(row, k + byte, held);
    copy_16_async(row + L::kTileBytes, v + byte, held);
  }
  commit_async_copies();
}

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
  using L = DecodeLayout<Stored, D>;
  constexpr int kPerChunk = 16 / static_cast<int>(sizeof(Stored));
  const int lane = static_cast<int>(threadIdx.x % 32);
  const bool e4m3 = is_e4m3(p.kv_format);
  const std::int64_t slot = first + lane;
  const std::int64_t pos = slot < end ? cached_position(cache, b, slot, i) : -1;
  const bool seen = pos >= 0 && band_visible(p.band, i, pos);
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

// Streams the split's tiles through shared memory and folds each into the warp's head (warps past
// the CTA's heads only help copy).
template <class Stored, int D>
__device__ inline void fold_range(const AttnParams& p, const CacheView& cache, int b, int kv_head, std::int64_t i,
                                  KeyRange range, unsigned char* stages, const float* q, bool serves, HeadState<D>& s) {
  using L = DecodeLayout<Stored, D>;
  const std::int64_t tiles = (range.end - range.first + kDecodeTileKeys - 1) / kDecodeTileKeys;
  for (int t = 0; t < L::kStages - 1; ++t)
    if (t < tiles) copy_tile_async<Stored, D>(cache, b, kv_head, range.first + t * kDecodeTileKeys, range.end,
                                              stages + t * L::kStageBytes);
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t ahead = t + L::kStages - 1;  // into the stage tile t - 1 used, free since the last barrier
    if (ahead < tiles)
      copy_tile_async<Stored, D>(cache, b, kv_head, range.first + ahead * kDecodeTileKeys, range.end,
                                 stages + ahead % L::kStages * L::kStageBytes);
    else
      commit_async_copies();  // an empty group keeps the count the wait below relies on
    wait_async_copies<L::kStages - 1>();
    __syncthreads();
    if (serves)
      fold_tile<Stored, D>(p, cache, b, i, range.first + t * kDecodeTileKeys, range.end,
                           stages + t % L::kStages * L::kStageBytes, q, s);
    __syncthreads();  // every warp is done with this stage before a copy reuses it
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kDecodeThreads, kDecodeMinCtasPerSm)
    decode_split_kernel(AttnParams p, CacheView cache, const std::int64_t* q_pos, int splits, float* partials) {
  float* q = dynamic_shared<float>();  // [kHeadsPerCta][D], then the tiles
  unsigned char* stages = reinterpret_cast<unsigned char*>(q + kHeadsPerCta * D);
  const int split = blockIdx.x, b = blockIdx.z;
  const DecodeHeads served = decode_heads(p, static_cast<int>(blockIdx.y));
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t i = q_pos[b];
  const KeyRange range = split_range(decode_slot_range(cache.policy, cache.slots, p.band, i), splits, split);
  const float scale_log2 = p.scale * 1.4426950408889634f;

  for (int e = static_cast<int>(threadIdx.x); e < kHeadsPerCta * D; e += kDecodeThreads) {
    const int h = e / D, d = e % D;
    const T* q_row = static_cast<const T*>(p.q) + (p.seq_offsets[b] + i) * p.q_row_stride +
                     (served.first + h) * p.q_head_stride;
    q[e] = h < served.count ? to_float(q_row[d]) * scale_log2 : 0.f;
  }  // the first tile's barrier publishes these
  const bool serves = warp < served.count;
  HeadState<D> s;
  if (is_fp8(p.kv_format)) fold_range<std::uint8_t, D>(p, cache, b, served.kv_head, i, range, stages, q + warp * D, serves, s);
  else fold_range<T, D>(p, cache, b, served.kv_head, i, range, stages, q + warp * D, serves, s);
  if (!serves) return;

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
