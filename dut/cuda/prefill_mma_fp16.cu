// Tensor-core prefill for fp16 storage (its own translation unit, so the dtypes compile in parallel).
#include "prefill_mma_launch.cuh"

namespace swa::dut::cuda {
template <>
void launch_prefill<__half>(const AttnParams& p, const RowWork& work, const CacheView& cache, int tiles,
                            cudaStream_t stream) {
  launch_prefill_mma<__half>(p, work, cache, tiles, stream);
}
}  // namespace swa::dut::cuda
