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

using DecodeSplitKernel = void (*)(AttnParams, CacheView, const std::int64_t*, int, float*, unsigned*);

// A split kernel and the dynamic shared memory a launch of it takes.
struct SplitKernel {
  DecodeSplitKernel kernel = nullptr;
  int shared_bytes = 0;
};

// Allows `kernel` its dynamic shared memory: above 48 KB a kernel must ask.
void allow_shared_bytes(DecodeSplitKernel kernel, int bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
        "cudaFuncSetAttribute(decode split kernel)");
}

// The most dynamic shared memory the current device lets one CTA opt in to.
int shared_bytes_optin() {
  int device = 0, bytes = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  return bytes;
}

// The split kernel a run of storage type T and head size D takes (tensor cores for fp16/bf16 caches
// up to D = 128, with three stages of tiles where the device allows their shared memory, else CUDA
// cores), allowed its shared memory once per process.
template <class T, int D>
SplitKernel split_kernel(bool fp8_cache) {
  if constexpr (kDecodeMmaCompiled<T, D>) {
    if (decode_on_tensor_cores<T, D>(fp8_cache)) {
      static const SplitKernel mma = [] {
        constexpr int deep_bytes = MmaDecodeLayout<T, D, kMmaDecodeDeepStages>::kSharedBytes;
        const SplitKernel chosen =
            deep_bytes <= shared_bytes_optin()
                ? SplitKernel{decode_mma_split_kernel<T, D, kMmaDecodeDeepStages>, deep_bytes}
                : SplitKernel{decode_mma_split_kernel<T, D, kDecodeStages>, MmaDecodeLayout<T, D, kDecodeStages>::kSharedBytes};
        allow_shared_bytes(chosen.kernel, chosen.shared_bytes);
        return chosen;
      }();
      return mma;
    }
  }
  static const bool allowed = (allow_shared_bytes(decode_split_kernel<T, D>, std::max(simt_decode_shared_bytes<T, D>(false),
                                                                                     simt_decode_shared_bytes<T, D>(true))),
                               true);
  (void)allowed;
  return {decode_split_kernel<T, D>, simt_decode_shared_bytes<T, D>(fp8_cache)};
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
      for (bool fp8 : {false, true}) {
        const SplitKernel k = split_kernel<T, D>(fp8);
        check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&answer[fp8], k.kernel, kDecodeThreads, k.shared_bytes),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor(decode split kernel)");
      }
      return answer;
    }();
    ctas = by_format[is_fp8(p.kv_format)];
  });
  if (!compiled) throw CudaError("decode: no kernel compiled for head size " + std::to_string(p.head_size));
  return ctas > 0 ? ctas : 1;
}

// One launch a decode step: the split kernel also writes the step's new K/V row into the cache
// (decode_fresh_row.cuh), and its last CTA of a head chunk merges the splits (decode_merge.cuh).
template <class T>
void launch_decode(const AttnParams& p, const CacheView& cache, const std::int64_t* q_pos, int splits,
                   float* partials, unsigned* arrivals, cudaStream_t stream) {
  const bool compiled = with_head_size(p.head_size, [&](auto head_size) {
    constexpr int D = decltype(head_size)::value;
    const SplitKernel k = split_kernel<T, D>(is_fp8(p.kv_format));
    k.kernel<<<decode_grid(p, splits), kDecodeThreads, k.shared_bytes, stream>>>(p, cache, q_pos, splits, partials, arrivals);
    check_launch("decode split kernel");
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
