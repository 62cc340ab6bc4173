#pragma once
// The tensor-core prefill's launcher, included by one .cu file per storage type.
#include <string>

#include "cuda_check.hpp"
#include "dispatch.hpp"
#include "prefill_mma_kernel.cuh"

namespace swa::dut::cuda {

template <class T>
void launch_prefill_mma(const AttnParams& p, const RowWork& work, const CacheView& cache, int tiles,
                        cudaStream_t stream) {
  if (tiles == 0) return;
  const bool compiled = with_head_size(p.head_size, [&](auto head_size) {
    constexpr int D = decltype(head_size)::value;
    using Tile = MmaTile<T, D>;
    check(cudaFuncSetAttribute(prefill_mma_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes),
          "cudaFuncSetAttribute(prefill_mma_kernel)");
    prefill_mma_kernel<T, D><<<dim3(tiles, p.heads_q), Tile::kThreads, Tile::kSmemBytes, stream>>>(p, work, cache);
    check_launch("prefill_mma_kernel");
  });
  if (!compiled) throw CudaError("prefill: no kernel compiled for head size " + std::to_string(p.head_size));
}

}  // namespace swa::dut::cuda
