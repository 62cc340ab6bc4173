// Split-K decode: the launcher (the kernels are in decode_kernel.cuh).
#include <string>

#include "cuda_check.hpp"
#include "decode_kernel.cuh"
#include "dispatch.hpp"
#include "launch.hpp"

namespace swa::dut::cuda {

template <class T>
void launch_decode(const AttnParams& p, const CacheView& cache, const std::int64_t* q_pos, int splits,
                   float* partials, cudaStream_t stream) {
  const bool compiled = with_head_size(p.head_size, [&](auto head_size) {
    constexpr int D = decltype(head_size)::value;
    decode_split_kernel<T, D><<<decode_grid(p, splits), kDecodeThreads, sizeof(DecodeShared<D>), stream>>>(
        p, cache, q_pos, splits, partials);
    check_launch("decode_split_kernel");
  });
  if (!compiled) throw CudaError("decode: no kernel compiled for head size " + std::to_string(p.head_size));
  decode_merge_kernel<T><<<dim3(p.heads_q, p.batch), kMergeThreads, sizeof(DecodeMergeShared), stream>>>(p, q_pos, splits, partials);
  check_launch("decode_merge_kernel");
}

template void launch_decode<float>(const AttnParams&, const CacheView&, const std::int64_t*, int, float*, cudaStream_t);
template void launch_decode<__half>(const AttnParams&, const CacheView&, const std::int64_t*, int, float*, cudaStream_t);
template void launch_decode<__nv_bfloat16>(const AttnParams&, const CacheView&, const std::int64_t*, int, float*,
                                           cudaStream_t);

}  // namespace swa::dut::cuda
