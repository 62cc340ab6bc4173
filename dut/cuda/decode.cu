// Split-K decode: the launcher (the kernels are in decode_kernel.cuh).
#include <algorithm>
#include <array>
#include <string>

#include "cuda_check.hpp"
#include "decode_kernel.cuh"
#include "dispatch.hpp"
#include "launch.hpp"

namespace swa::dut::cuda {
namespace {

// Whether the current device may start a kernel before the one ahead of it in the stream ends
// (programmatic dependent launch: compute capability 9.0 and later).
bool programmatic_launch_supported() {
  static const bool supported = [] {
    int device = 0, major = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    return major >= 9;
  }();
  return supported;
}

using DecodeSplitKernel = void (*)(AttnParams, CacheView, const std::int64_t*, int, float*, unsigned*);

// Allows `kernel` its dynamic shared memory: above 48 KB a kernel must ask.
void allow_shared_bytes(DecodeSplitKernel kernel, int bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
        "cudaFuncSetAttribute(decode split kernel)");
}

// The split kernel a run of storage type T and head size D takes (tensor cores for fp16/bf16 caches
// up to D = 128, else CUDA cores), allowed its shared memory once per process.
template <class T, int D>
DecodeSplitKernel split_kernel(bool fp8_cache) {
  if constexpr (kDecodeMmaCompiled<T, D>) {
    if (decode_on_tensor_cores<T, D>(fp8_cache)) {
      static const bool allowed = (allow_shared_bytes(decode_mma_split_kernel<T, D>, decode_shared_bytes<T, D>(false)), true);
      (void)allowed;
      return decode_mma_split_kernel<T, D>;
    }
  }
  static const bool allowed = (allow_shared_bytes(decode_split_kernel<T, D>, std::max(SimtDecodeLayout<T, D>::kSharedBytes,
                                                                                     SimtDecodeLayout<std::uint8_t, D>::kSharedBytes)),
                               true);
  (void)allowed;
  return decode_split_kernel<T, D>;
}

}  // namespace

template <class T>
int decode_ctas_per_multiprocessor(const AttnParams& p) {
  int ctas = 0;
  const bool compiled = with_head_size(p.head_size, [&](auto head_size) {
    constexpr int D = decltype(head_size)::value;
    // The answer depends on the kernel and the device alone, so it is asked once per process (for
    // the dtype's kernel and the FP8 codes' one), not on every decode step.
    static const std::array<int, 2> by_format = [] {
      std::array<int, 2> answer{};
      for (bool fp8 : {false, true})
        check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&answer[fp8], split_kernel<T, D>(fp8), kDecodeThreads,
                                                            decode_shared_bytes<T, D>(fp8)),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor(decode split kernel)");
      return answer;
    }();
    ctas = by_format[is_fp8(p.kv_format)];
  });
  if (!compiled) throw CudaError("decode: no kernel compiled for head size " + std::to_string(p.head_size));
  return ctas > 0 ? ctas : 1;
}

// The split kernel starts while the cache write before it runs (grid_dependency.cuh): its CTAs load
// their queries, then wait for the cache.
template <class T>
void launch_decode(const AttnParams& p, const CacheView& cache, const std::int64_t* q_pos, int splits,
                   float* partials, unsigned* arrivals, cudaStream_t stream) {
  const bool compiled = with_head_size(p.head_size, [&](auto head_size) {
    constexpr int D = decltype(head_size)::value;
    const bool fp8 = is_fp8(p.kv_format);
    cudaLaunchConfig_t config{};
    config.gridDim = decode_grid(p, splits);
    config.blockDim = dim3(kDecodeThreads);
    config.dynamicSmemBytes = static_cast<std::size_t>(decode_shared_bytes<T, D>(fp8));
    config.stream = stream;
    cudaLaunchAttribute early_start{};
    early_start.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    early_start.val.programmaticStreamSerializationAllowed = 1;
    if (programmatic_launch_supported()) config.attrs = &early_start, config.numAttrs = 1;
    check(cudaLaunchKernelEx(&config, split_kernel<T, D>(fp8), p, cache, q_pos, splits, partials, arrivals),
          "cudaLaunchKernelEx(decode split kernel)");
  });
  if (!compiled) throw CudaError("decode: no kernel compiled for head size " + std::to_string(p.head_size));
}

template void launch_decode<float>(const AttnParams&, const CacheView&, const std::int64_t*, int, float*, unsigned*, cudaStream_t);
template void launch_decode<__half>(const AttnParams&, const CacheView&, const std::int64_t*, int, float*, unsigned*, cudaStream_t);
template void launch_decode<__nv_bfloat16>(const AttnParams&, const CacheView&, const std::int64_t*, int, float*,
                                           unsigned*, cudaStream_t);
template int decode_ctas_per_multiprocessor<float>(const AttnParams&);
template int decode_ctas_per_multiprocessor<__half>(const AttnParams&);
template int decode_ctas_per_multiprocessor<__nv_bfloat16>(const AttnParams&);

}  // namespace swa::dut::cuda
