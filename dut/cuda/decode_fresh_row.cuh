#pragma once
// A decode step writes its new K/V row into the cache in the decode launch itself, not in a launch
// of its own before it (one launch a step, not two). Every CTA loads the new row of its (sequence,
// kv head) into registers, in the cache's stored format (FP8 codes quantised as the cache write of
// a chunk does), and puts it into its tile where the cache's slot would be read; the tile copy
// skips that slot. The one CTA of the kv head that owns the slot stores the row in the cache once
// it has folded its keys. So no CTA reads the slot being written, and no ordering between CTAs is
// needed.
#include <cstdint>
#include <type_traits>

#include "kernel_args.hpp"
#include "storage.cuh"

namespace swa::dut::cuda {

template <class Stored, int D>
struct FreshRow {
  static constexpr int kPerThread = (D + kDecodeThreads - 1) / kDecodeThreads;
  static constexpr int kSize = static_cast<int>(sizeof(Stored));
  // The slot the cache stores query position i in, or -1 when it does not store it (a compact
  // ring's positions below its base, a paged position without a page).
  std::int64_t slot = -1;
  Stored k[kPerThread] = {}, v[kPerThread] = {};  // this thread's elements threadIdx.x + r kDecodeThreads

  // Position i's K/V row of sequence b, kv head `kv_head`, from this call's inputs (of type T).
  template <class T>
  __device__ static FreshRow load(const AttnParams& p, const CacheView& cache, int b, int kv_head, std::int64_t i) {
    FreshRow row;
    if (!cache_writes_position(cache, b, i, i + 1)) return row;
    row.slot = cache_slot(cache, b, i);
    const KeyLocation input = locate_key(p, cache, i, b, i, kv_head);  // position i is this call's row
    const T* k_in = static_cast<const T*>(p.k) + input.k_element;
    const T* v_in = static_cast<const T*>(p.v) + input.v_element;
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int d = static_cast<int>(threadIdx.x) + r * kDecodeThreads;
      if (d >= D) break;
      row.k[r] = stored<T>(p, k_in[d], p.k_descale);
      row.v[r] = stored<T>(p, v_in[d], p.v_descale);
    }
    return row;
  }

  // Whether this split CTA stores the row: the first head chunk's CTA of the kv head whose split
  // holds the slot, or split 0's when no split does (then no CTA reads it either).
  __device__ bool stored_by(const AttnParams& p, KeyRange decode_range, KeyRange split, int split_index) const {
    if (slot < 0 || blockIdx.y % decode_head_chunks(p) != 0) return false;
    const auto holds = [&](KeyRange r) { return slot >= r.first && slot < r.end; };
    return holds(split) || (split_index == 0 && !holds(decode_range));
  }

  // Into the K and V rows of a tile in shared memory.
  __device__ void put(unsigned char* k_row, unsigned char* v_row) const {
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int d = static_cast<int>(threadIdx.x) + r * kDecodeThreads;
      if (d >= D) break;
      reinterpret_cast<Stored*>(k_row)[d] = k[r];
      reinterpret_cast<Stored*>(v_row)[d] = v[r];
    }
  }

  // Into the cache.
  __device__ void store(const CacheView& cache, int b, int kv_head) const {
    const std::int64_t at = cache_element(cache, b, slot, kv_head);
    put(static_cast<unsigned char*>(cache.k) + at * kSize, static_cast<unsigned char*>(cache.v) + at * kSize);
  }

 private:
  template <class T>
  __device__ static Stored stored(const AttnParams& p, T x, float descale) {
    if constexpr (std::is_same_v<Stored, std::uint8_t>)
      return fp8_from_float(to_float(x) / descale, is_e4m3(p.kv_format));
    else
      return x;
  }
};

}  // namespace swa::dut::cuda
