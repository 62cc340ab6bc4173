// The cache write's launcher (the kernel is in cache_write_kernel.cuh).
#include "cache_write_kernel.cuh"
#include "cuda_check.hpp"
#include "launch.hpp"

namespace swa::dut::cuda {

template <class T>
void launch_cache_write(const AttnParams& p, const CacheView& cache, const std::int64_t* row_begin,
                        const std::int64_t* row_end, std::int64_t max_rows, cudaStream_t stream) {
  if (max_rows <= 0) return;
  cache_write_kernel<T><<<dim3(static_cast<unsigned>(max_rows), p.heads_kv, p.batch), kCopyThreads, 0, stream>>>(
      p, cache, row_begin, row_end);
  check_launch("cache_write_kernel");
}

template void launch_cache_write<float>(const AttnParams&, const CacheView&, const std::int64_t*, const std::int64_t*,
                                        std::int64_t, cudaStream_t);
template void launch_cache_write<__half>(const AttnParams&, const CacheView&, const std::int64_t*, const std::int64_t*,
                                         std::int64_t, cudaStream_t);
template void launch_cache_write<__nv_bfloat16>(const AttnParams&, const CacheView&, const std::int64_t*,
                                                const std::int64_t*, std::int64_t, cudaStream_t);

}  // namespace swa::dut::cuda
