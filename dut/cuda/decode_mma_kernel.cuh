#pragma once
// Split decode on tensor cores for fp16/bf16 caches (mma.sync.m16n8k16, fp32 accumulate), head
// sizes up to 128. Decode is one query row per q head, so the CTA's (up to kHeadsPerCta) q heads
// are the rows of the 16-row A operand, the rest zero, and each warp folds its own 16 keys of every
// tile with the FlashAttention-2 register layout: S = Q K^T, then P (rounded to the dtype, as
// prefill does) times V. The CUDA-core kernel spent its time converting and multiplying element by
// element, below what memory delivers (dut/cuda/README.md); here a tile of 64 keys costs each warp
// 2 D/16 mma instructions. At the end the four warps' states of a head are merged in shared memory
// into the split's partial state, in warp order, and the last split merges the splits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "decode_fresh_row.cuh"
#include "decode_merge.cuh"
#include "decode_tiles.cuh"
#include "kernel_args.hpp"
#include "mma_fragment.hpp"
#include "shared_memory.cuh"
#include "storage.cuh"
#include "tensor_core_ops.cuh"

namespace swa::dut::cuda {

constexpr int kMmaDecodeWarps = kDecodeThreads / 32;
constexpr int kMmaDecodeWarpKeys = 16;  // one k16 block of P.V per warp and tile
// Stages of tiles: three where the device lets a CTA take them (104 KB at fp16 D = 128; an H100
// ran a decode step 8-13 % faster with them than with two: dut/cuda/README.md), else two (sm_86,
// sm_89). CTAs per multiprocessor the registers must allow: as many as the stages' shared memory
// lets an H100 hold (two of 104 KB, three of 69.6 KB).
constexpr int kMmaDecodeDeepStages = 3;
template <int Stages>
constexpr int kMmaDecodeMinCtasPerSm = Stages > kDecodeStages ? 2 : 3;

// Whether storage type T and head size D have the tensor-core kernel; a run takes it unless its
// cache holds FP8 codes.
template <class T, int D>
constexpr bool kDecodeMmaCompiled = !std::is_same_v<T, float> && D <= 128 && D % 16 == 0;
template <class T, int D>
constexpr bool decode_on_tensor_cores(bool fp8_cache) {
  return kDecodeMmaCompiled<T, D> && !fp8_cache;
}

// No queries in shared memory (their fragments live in registers); tiles of 16 keys per warp.
template <class T, int D, int Stages>
using MmaDecodeLayout = DecodeLayout<T, D, kMmaDecodeWarps * kMmaDecodeWarpKeys, 0, Stages,
                                     (Stages > kDecodeStages ? kDecodeDeepSharedBudget : kDecodeSharedBudget)>;

// One warp's state for the CTA's heads: rows g (head g of the chunk, this lane's group) and g + 8
// (always zero) of the m16n8 accumulators. m and l are row g's; l is this lane's share until the
// four lanes of the row add theirs.
template <int D>
struct MmaHeadState {
  float m = -INFINITY, l = 0.f;
  float o[D / 8][4] = {};
};

// This warp's 16 keys of a tile (K rows at `k_rows`, V rows at `v_rows`, kPitch apart) folded into s.
// `seen_keys` bit j: the warp's key j is seen; a key not seen weighs 0 and its V row is zeroed first
// (an unwritten slot may hold NaN, and 0 x NaN is NaN inside the mma).
template <class T, int D, class L>
__device__ inline void fold_warp_keys(const AttnParams& p, const unsigned (&q)[D / 16][2], unsigned char* k_rows,
                                      unsigned char* v_rows, unsigned seen_keys, MmaHeadState<D>& s) {
  using Ops = TensorCoreOps<T>;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (seen_keys != (1u << kMmaDecodeWarpKeys) - 1) {
    for (int piece = lane; piece < kMmaDecodeWarpKeys * L::kChunksPerRow; piece += 32) {
      const int key = piece / L::kChunksPerRow, chunk = piece % L::kChunksPerRow;
      if ((seen_keys >> key & 1u) == 0) *reinterpret_cast<uint4*>(v_rows + key * L::kPitch + chunk * 16) = make_uint4(0, 0, 0, 0);
    }
    __syncwarp();
  }

  // S = Q K^T: n8 blocks of keys 0-7 and 8-15.
  float score[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const unsigned a[4] = {q[kk][0], 0u, q[kk][1], 0u};
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
      unsigned bk[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const FragCoord at = mma_b_coord(lane, 2 * r);  // row: head dim, col: key
        bk[r] = *reinterpret_cast<const unsigned*>(k_rows + (nb * 8 + at.col) * L::kPitch +
                                                   (kk * 16 + at.row) * static_cast<int>(sizeof(T)));
      }
      Ops::mma(score[nb], a, bk);
    }
  }

  // Row g's online softmax in base 2; row g + 8 weighs nothing.
  const float scale_log2 = p.scale * 1.4426950408889634f, cap_log2 = cap_in_log2(p);
  float tile_max = -INFINITY;
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int key = nb * 8 + mma_c_coord(lane, e).col;
      const float x = (seen_keys >> key & 1u) ? soft_cap_log2(score[nb][e] * scale_log2, cap_log2) : -INFINITY;
      score[nb][e] = x;
      tile_max = fmaxf(tile_max, x);
    }
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
  const float new_max = fmaxf(s.m, tile_max);
  const float shift = new_max == -INFINITY ? 0.f : new_max;  // nothing seen yet: exp2(-inf) = 0 below
  const float correction = s.m == -INFINITY ? 0.f : exp2f(s.m - shift);
  s.m = new_max;
  s.l *= correction;
#pragma unroll
  for (int db = 0; db < D / 8; ++db) s.o[db][0] *= correction, s.o[db][1] *= correction;
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      score[nb][e] = exp2f(score[nb][e] - shift);
      s.l += score[nb][e];
    }

  // O += P V: keys are the k dimension; B element (key, column) pairs come from two V rows.
  const unsigned a[4] = {Ops::pack(score[0][0], score[0][1]), 0u, Ops::pack(score[1][0], score[1][1]), 0u};
#pragma unroll
  for (int db = 0; db < D / 8; ++db) {
    unsigned bv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const FragCoord at = mma_b_coord(lane, 2 * r);  // row: key (at.row and at.row + 1), col: head dim
      const unsigned char* element = v_rows + at.row * L::kPitch + (db * 8 + at.col) * static_cast<int>(sizeof(T));
      const unsigned lo = *reinterpret_cast<const unsigned short*>(element);
      const unsigned hi = *reinterpret_cast<const unsigned short*>(element + L::kPitch);
      bv[r] = lo | hi << 16;
    }
    Ops::mma(s.o[db], a, bv);
  }
}

template <class T, int D, int Stages>
__global__ void __launch_bounds__(kDecodeThreads, kMmaDecodeMinCtasPerSm<Stages>)
    decode_mma_split_kernel(AttnParams p, CacheView cache, const std::int64_t* q_pos, int splits, float* partials,
                            unsigned* arrivals) {
  using L = MmaDecodeLayout<T, D, Stages>;
  static_assert(D % 16 == 0 && D <= 128);
  unsigned char* stages = dynamic_shared<unsigned char>();
  const int split = blockIdx.x, b = blockIdx.z;
  const DecodeHeads served = decode_heads(p, static_cast<int>(blockIdx.y));
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int group = lane / 4;  // this lane's accumulator row: head first + group
  const std::int64_t i = q_pos[b];
  const KeyRange decode_range = decode_slot_range(cache.policy, cache.slots, p.band, i);
  const KeyRange range = split_range(decode_range, splits, split);

  // Row g of A (head g of the chunk) in registers: elements (g, 16 kk + 2 pair + {0, 1}) and (g, ... + 8).
  unsigned q[D / 16][2];
  {
    const T* q_row = static_cast<const T*>(p.q) + (p.seq_offsets[b] + i) * p.q_row_stride +
                     static_cast<std::int64_t>(served.first + group) * p.q_head_stride;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int column = mma_a_coord(lane, 4 * r).col + 16 * kk;
        T two[2];
        if (group < served.count) two[0] = q_row[column], two[1] = q_row[column + 1];
        else two[0] = two[1] = from_float<T>(0.f);
        memcpy(&q[kk][r], static_cast<const void*>(two), sizeof q[kk][r]);
      }
  }

  const auto fresh = FreshRow<T, D>::template load<T>(p, cache, b, served.kv_head, i);
  MmaHeadState<D> s;
  stream_tiles<T, L>(cache, b, served.kv_head, range, fresh, stages, [&](std::int64_t first, const unsigned char* tile) {
    const int key = lane % kMmaDecodeWarpKeys;
    const std::int64_t warp_first = first + warp * kMmaDecodeWarpKeys;
    const unsigned seen_keys =
        __ballot_sync(0xffffffffu, decode_sees(p, cache, b, i, warp_first + key, range.end)) & 0xFFFFu;
    if (seen_keys == 0) return;  // the same in every lane of the warp
    unsigned char* k_rows = const_cast<unsigned char*>(tile) + warp * kMmaDecodeWarpKeys * L::kPitch;
    fold_warp_keys<T, D, L>(p, q, k_rows, k_rows + L::kTileBytes, seen_keys, s);
  });

  // The warps' states of each head, into shared memory (the tiles are consumed: stream_tiles ended
  // on a barrier), then merged by warp h for head h, in warp order.
  constexpr int kStateFloats = D + 2;
  static_assert(kMmaDecodeWarps * kHeadsPerCta * kStateFloats * static_cast<int>(sizeof(float)) <= L::kStages * L::kStageBytes);
  float* states = reinterpret_cast<float*>(stages);  // [warp][head][m, l, o...]
  s.l += __shfl_xor_sync(0xffffffffu, s.l, 1);
  s.l += __shfl_xor_sync(0xffffffffu, s.l, 2);
  if (group < served.count) {
    float* mine = states + (warp * kHeadsPerCta + group) * kStateFloats;
    if (lane % 4 == 0) mine[0] = s.m, mine[1] = s.l;
#pragma unroll
    for (int db = 0; db < D / 8; ++db) {
      const int column = db * 8 + mma_c_coord(lane, 0).col;
      mine[2 + column] = s.o[db][0];
      mine[3 + column] = s.o[db][1];
    }
  }
  __syncthreads();
  if (warp < served.count) {
    float most = -INFINITY;
    for (int w = 0; w < kMmaDecodeWarps; ++w) most = fmaxf(most, states[(w * kHeadsPerCta + warp) * kStateFloats]);
    float weight[kMmaDecodeWarps];
    for (int w = 0; w < kMmaDecodeWarps; ++w) weight[w] = merge_weight(states[(w * kHeadsPerCta + warp) * kStateFloats], most);
    float* partial = partial_at(partials, p, splits, b, served.first + warp, split);
    for (int column = lane; column < kStateFloats; column += 32) {
      float merged = 0.f;
      for (int w = 0; w < kMmaDecodeWarps; ++w)
        merged += weight[w] * states[(w * kHeadsPerCta + warp) * kStateFloats + column];
      partial[column] = column == 0 ? most : merged;
    }
  }
  if (fresh.stored_by(p, decode_range, range, split)) fresh.store(cache, b, served.kv_head);
  static_assert(kDecodeMergeScratchBytes <= L::kStageBytes);
  merge_if_last<T>(p, q_pos, splits, partials, arrivals, served, b, stages);
}

}  // namespace swa::dut::cuda
