#pragma once
// Host entry points of the kernels, one explicit instantiation per storage type (float, __half,
// __nv_bfloat16) in the .cu files. Pointers inside the arguments are device pointers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernel_args.hpp"

namespace swa::dut::cuda {

// Query rows per CTA of the prefill kernels: 128 (8 warps of 16 rows) on tensor cores for D <= 128,
// where the registers allow it, so each K/V tile serves twice the rows; 64 otherwise (fp32, and
// D > 128 on tensor cores). Every such tile starts on a multiple of 64 rows.
inline constexpr int kPrefillTileRowsFinest = 64;
SWA_HOST_DEVICE constexpr int prefill_tile_rows(bool tensor_cores, int head_size) {
  return tensor_cores && head_size <= 128 ? 128 : kPrefillTileRowsFinest;
}

// Attention of the rows in `work` (tiles = work.tile_prefix[batch] CTAs per q head) against the
// keys the band lets them see: this call's rows of p.k/p.v, and the cache below work.row_begin.
template <class T>
void launch_prefill(const AttnParams& p, const RowWork& work, const CacheView& cache, int tiles, cudaStream_t stream);

// A chunk's sequence rows [row_begin[b], row_end[b]) of p.k/p.v into the cache slots they survive in;
// max_rows >= every row_end[b] - row_begin[b].
template <class T>
void launch_cache_write(const AttnParams& p, const CacheView& cache, const std::int64_t* row_begin,
                        const std::int64_t* row_end, std::int64_t max_rows, cudaStream_t stream);

// One decode query per sequence at q_pos[b] against the cache, whose row q_pos[b] of p.k/p.v the
// same launch writes into the cache (no cache write before it): `splits` partial states per
// (sequence, q head) into `partials` (batch * heads_q * splits * (head_size + 2) floats), merged
// by log-sum-exp into p.out by the last split to finish, in the same launch. `arrivals`: the
// launch's counters (decode_arrival_counters(p) of them), zero before and after it.
template <class T>
void launch_decode(const AttnParams& p, const CacheView& cache, const std::int64_t* q_pos, int splits,
                   float* partials, unsigned* arrivals, cudaStream_t stream);

// A one-thread kernel that spins until *flag (mapped host memory) is not 0, or for limit_ns at
// most (stream_hold.hpp).
void launch_stream_hold(const int* flag, std::uint64_t limit_ns, cudaStream_t stream);

// How many CTAs of launch_decode's split kernel for p (its head size and KV format) one
// multiprocessor of the current device holds at once.
template <class T>
int decode_ctas_per_multiprocessor(const AttnParams& p);

// Defined per storage type: the tensor-core kernel for fp16/bf16 (prefill_mma_*.cu), the CUDA-core
// kernel for fp32 (prefill_simt.cu).
template <>
void launch_prefill<float>(const AttnParams&, const RowWork&, const CacheView&, int, cudaStream_t);
template <>
void launch_prefill<__half>(const AttnParams&, const RowWork&, const CacheView&, int, cudaStream_t);
template <>
void launch_prefill<__nv_bfloat16>(const AttnParams&, const RowWork&, const CacheView&, int, cudaStream_t);

}  // namespace swa::dut::cuda
