#pragma once
// What both split-decode kernels (CUDA cores: decode_kernel.cuh; tensor cores:
// decode_mma_kernel.cuh) share: the launch's shape, where a CTA's shared memory holds what, and the
// stream of K/V tiles through it. Decode is bound by reading the cache: a CTA copies tiles of K and
// V rows into shared memory with asynchronous copies, the next tile's in flight while it computes
// on this one, so the bytes in flight cost no registers. Each K/V row is read from memory once for
// all the CTA's q heads (GQA).
#include <cstdint>

#include "async_copy.cuh"
#include "kernel_args.hpp"
#include "storage.cuh"

namespace swa::dut::cuda {

// Shared memory a decode CTA may take on every architecture the library is built for (sm_80+):
// within what sm_86/sm_89 allow one CTA (99 KB).
constexpr int kDecodeSharedBudget = 96 * 1024;
// What a CTA may take where the device lets it opt in to more: sm_80 allows 163 KB, sm_90 227 KB.
// Only the tensor-core kernel's deep layout uses it, where the device allows it (decode.cu).
constexpr int kDecodeDeepSharedBudget = 160 * 1024;
// Tiles in shared memory at once, unless a layout asks for more. (For the CUDA-core kernel on an
// H100, 3 stages were no faster than 2: dut/cuda/README.md, "Measured on a GPU".)
constexpr int kDecodeStages = 2;

// Where a decode CTA's shared memory holds what, for cache elements of type Stored (the dtype, or
// one-byte FP8 codes): QueryBytes of queries, then kStages tiles, each Keys K rows then as many V
// rows. Rows are kPitch bytes apart, an odd number of 16-byte words, so the 8 lanes of a quarter
// warp that read 16 bytes of 8 different rows at one column offset meet 8 different groups of 4
// banks.
template <class Stored, int D, int Keys, int QueryBytes, int Stages = kDecodeStages, int Budget = kDecodeSharedBudget>
struct DecodeLayout {
  static constexpr int kKeys = Keys;
  static constexpr int kRowBytes = D * static_cast<int>(sizeof(Stored));
  static_assert(kRowBytes % 16 == 0, "a row is copied in 16-byte pieces");
  static constexpr int kChunksPerRow = kRowBytes / 16;
  static constexpr int kPitch = kChunksPerRow % 2 == 1 ? kRowBytes : kRowBytes + 16;
  static constexpr int kTileBytes = kKeys * kPitch;  // K, then V at + kTileBytes
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kQueryBytes = QueryBytes;
  // Stages stages (tiles copied while another is read) where they fit the budget, else fewer.
  static constexpr int kStages = kQueryBytes + Stages * kStageBytes <= Budget ? Stages
                                 : kQueryBytes + 2 * kStageBytes <= Budget    ? 2
                                                                              : 1;
  static constexpr int kSharedBytes = kQueryBytes + kStages * kStageBytes;
  static_assert(kSharedBytes <= Budget, "a decode CTA's tiles exceed the shared-memory budget");
};

// The launch's CTAs: (split, kv head x head chunk, sequence).
inline dim3 decode_grid(const AttnParams& p, int splits) {
  return dim3(static_cast<unsigned>(splits), static_cast<unsigned>(p.heads_kv * decode_head_chunks(p)),
              static_cast<unsigned>(p.batch));
}

// Partial state of one (sequence, q head, split): max and sum (base 2), then head_size outputs.
SWA_HOST_DEVICE inline float* partial_at(float* partials, const AttnParams& p, int splits, int b, int head, int split) {
  return partials + ((static_cast<std::int64_t>(b) * p.heads_q + head) * splits + split) * (p.head_size + 2);
}

// Starts the copies of the K and V rows of slots [first, first + L::kKeys) into `stage`, every
// thread of the CTA a share of the 16-byte pieces. Slots past the range's end, paged slots whose
// page is not held, and `skipped` (the slot this launch writes: decode_fresh_row.cuh) are
// zero-filled without a read.
template <class Stored, class L>
__device__ inline void copy_tile_async(const CacheView& cache, int b, int kv_head, std::int64_t first, std::int64_t end,
                                       std::int64_t skipped, unsigned char* stage) {
  const auto* k = static_cast<const unsigned char*>(cache.k);
  const auto* v = static_cast<const unsigned char*>(cache.v);
  for (int piece = static_cast<int>(threadIdx.x); piece < L::kKeys * L::kChunksPerRow; piece += kDecodeThreads) {
    const int key = piece / L::kChunksPerRow, chunk = piece % L::kChunksPerRow;
    const std::int64_t slot = first + key;
    const bool held =
        slot < end && slot != skipped && (cache.policy != CachePolicy::paged || cache_page(cache, b, slot) >= 0);
    const std::int64_t byte =
        held ? cache_element(cache, b, slot, kv_head) * static_cast<std::int64_t>(sizeof(Stored)) + chunk * 16 : 0;
    unsigned char* row = stage + key * L::kPitch + chunk * 16;
    copy_16_async(row, k + byte, held);
    copy_16_async(row + L::kTileBytes, v + byte, held);
  }
  commit_async_copies();
}

// Streams the split's tiles through the stages and calls fold(first slot, tile) on every thread of
// the CTA for each tile in turn, once the whole tile is in shared memory, with the step's new row
// (`fresh`, a FreshRow) in its slot.
template <class Stored, class L, class Fresh, class Fold>
__device__ inline void stream_tiles(const CacheView& cache, int b, int kv_head, KeyRange range, const Fresh& fresh,
                                    unsigned char* stages, Fold&& fold) {
  const std::int64_t tiles = (range.end - range.first + L::kKeys - 1) / L::kKeys;
  const auto copy = [&](std::int64_t t) {
    copy_tile_async<Stored, L>(cache, b, kv_head, range.first + t * L::kKeys, range.end, fresh.slot,
                               stages + t % L::kStages * L::kStageBytes);
  };
  for (int t = 0; t < L::kStages - 1; ++t) {
    if (t < tiles) copy(t);
    else commit_async_copies();  // an empty group: the wait below counts on kStages - 1 groups ahead
  }
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t ahead = t + L::kStages - 1;  // into the stage tile t - 1 used, free since the last barrier
    if (ahead < tiles) copy(ahead);
    else commit_async_copies();  // an empty group keeps the count the wait below relies on
    wait_async_copies<L::kStages - 1>();
    __syncthreads();
    const std::int64_t first = range.first + t * L::kKeys;
    unsigned char* stage = stages + t % L::kStages * L::kStageBytes;
    if (fresh.slot >= first && fresh.slot < first + L::kKeys && fresh.slot < range.end) {  // the same in every thread
      const int key = static_cast<int>(fresh.slot - first);
      fresh.put(stage + key * L::kPitch, stage + L::kTileBytes + key * L::kPitch);
      __syncthreads();
    }
    fold(first, static_cast<const unsigned char*>(stage));
    __syncthreads();  // every warp is done with this stage before a copy reuses it
  }
}

// Whether the slot lane j of a tile stands for is a key query position i sees: its position is
// held (not an empty slot, nor past the range) and inside the band.
__device__ inline bool decode_sees(const AttnParams& p, const CacheView& cache, int b, std::int64_t i,
                                   std::int64_t slot, std::int64_t end) {
  const std::int64_t pos = slot < end ? cached_position(cache, b, slot, i) : -1;
  return pos >= 0 && band_visible(p.band, i, pos);
}

}  // namespace swa::dut::cuda
