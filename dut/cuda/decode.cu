// Split-K decode: the launcher (the kernels are in decode_kernel.cuh).
#include <algorithm>
#include <array>
#include <string>

#include "cuda_check.hpp"
#include "decode_kernel.cuh"
#include "dispatch.hpp"
#include "launch.hpp"

namespace swa::dut::cuda {

// The split kernel for head size D, allowed the larger of its two layouts' shared memory (the
// dtype's and FP8 codes'): above 48 KB a kernel must ask, once.
template <class T, int D>
auto split_kernel() {
  static const bool allowed = [] {
    const int most = std::max(decode_shared_bytes<T, D>(false), decode_shared_bytes<T, D>(true));
    check(cudaFuncSetAttribute(decode_split_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, most),
          "cudaFuncSetAttribute(decode_split_kernel)");
    return true;
  }();
  (void)allowed;
  return decode_split_kernel<T, D>;
}

template <class T>
int decode_ctas_per_multiprocessor(const AttnParams& p) {
  int ctas = 0;
  const bool compiled = with_head_size(p.head_size, [&](auto head_size) {
    constexpr int D = decltype(head_size)::value;
    // The answer depends on the kernel and the device alone, so it is asked once per process (for
    // the dtype's layout and the FP8 one), not on every decode step.
    static const std::array<int, 2> by_layout = [] {
      std::array<int, 2> answer{};
      for (bool fp8 : {false, true})
        check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&answer[fp8], split_kernel<T, D>(), kDecodeThreads,
                                                            decode_shared_bytes<T, D>(fp8)),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor(decode_split_kernel)");
      return answer;
    }();
    ctas = by_layout[is_fp8(p.kv_format)];
  });
  if (!compiled) throw CudaError("decode: no kernel compiled for head size " + std::to_string(p.head_size));
  return ctas > 0 ? ctas : 1;
}

template <class T>
void launch_decode(const AttnParams& p, const CacheView& cache, const std::int64_t* q_pos, int splits,
                   float* partials, cudaStream_t stream) {
  const bool compiled = with_head_size(p.head_size, [&](auto head_size) {
    constexpr int D = decltype(head_size)::value;
    const auto kernel = split_kernel<T, D>();
    kernel<<<decode_grid(p, splits), kDecodeThreads, decode_shared_bytes<T, D>(is_fp8(p.kv_format)), stream>>>(
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
template int decode_ctas_per_multiprocessor<float>(const AttnParams&);
template int decode_ctas_per_multiprocessor<__half>(const AttnParams&);
template int decode_ctas_per_multiprocessor<__nv_bfloat16>(const AttnParams&);

}  // namespace swa::dut::cuda
