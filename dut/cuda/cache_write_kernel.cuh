#pragma once
// A chunk's K/V into the device cache after attention: CTA (row, kv head, sequence) copies one head
// row. Only positions that survive an in-order write are copied, so a chunk longer than the ring
// never has two CTAs racing for a slot. (A decode step writes its row in its decode launch:
// decode_fresh_row.cuh.)
#include <cstdint>

#include "kernel_args.hpp"
#include "storage.cuh"

namespace swa::dut::cuda {

constexpr int kCopyThreads = 64;

template <class T>
__global__ void __launch_bounds__(kCopyThreads) cache_write_kernel(AttnParams p, CacheView cache,
                                                                   const std::int64_t* row_begin,
                                                                   const std::int64_t* row_end) {
  const int head = blockIdx.y, b = blockIdx.z;
  const std::int64_t pos = row_begin[b] + blockIdx.x, end = row_end[b];
  if (pos >= end || !cache_writes_position(cache, b, pos, end)) return;
  const std::int64_t dst = cache_element(cache, b, cache_slot(cache, b, pos), head);
  const std::int64_t row = p.seq_offsets[b] + pos;
  const T* k = static_cast<const T*>(p.k) + row * p.k_row_stride + head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + row * p.v_row_stride + head * p.v_head_stride;
  if (is_fp8(p.kv_format)) {  // quantised on the way in: one byte per element
    const bool e4m3 = is_e4m3(p.kv_format);
    std::uint8_t* codes_k = static_cast<std::uint8_t*>(cache.k) + dst;
    std::uint8_t* codes_v = static_cast<std::uint8_t*>(cache.v) + dst;
    for (int d = threadIdx.x; d < p.head_size; d += kCopyThreads) {
      codes_k[d] = fp8_from_float(to_float(k[d]) / p.k_descale, e4m3);
      codes_v[d] = fp8_from_float(to_float(v[d]) / p.v_descale, e4m3);
    }
    return;
  }
  T* cache_k = static_cast<T*>(cache.k) + dst;
  T* cache_v = static_cast<T*>(cache.v) + dst;
  for (int d = threadIdx.x; d < p.head_size; d += kCopyThreads) {
    cache_k[d] = k[d];
    cache_v[d] = v[d];
  }
}

}  // namespace swa::dut::cuda
