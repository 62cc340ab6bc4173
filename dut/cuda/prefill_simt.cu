// fp32 prefill on CUDA cores: the launcher (the kernel is in prefill_simt_kernel.cuh).
#include <string>

#include "cuda_check.hpp"
#include "dispatch.hpp"
#include "prefill_simt_kernel.cuh"

namespace swa::dut::cuda {

template <>
void launch_prefill<float>(const AttnParams& p, const RowWork& work, const CacheView& cache, int tiles,
                           cudaStream_t stream) {
  if (tiles == 0) return;
  const bool compiled = with_head_size(p.head_size, [&](auto head_size) {
    constexpr int D = decltype(head_size)::value;
    using Tile = SimtTile<D>;
    check(cudaFuncSetAttribute(prefill_simt_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes),
          "cudaFuncSetAttribute(prefill_simt_kernel)");
    prefill_simt_kernel<D><<<dim3(tiles, p.heads_q), Tile::kThreads, Tile::kSmemBytes, stream>>>(p, work, cache);
    check_launch("prefill_simt_kernel");
  });
  if (!compiled) throw CudaError("prefill: no kernel compiled for head size " + std::to_string(p.head_size));
}

}  // namespace swa::dut::cuda
