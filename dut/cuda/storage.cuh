#pragma once
// Loads and stores of the storage types as fp32, and their packed pairs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "swa/dut/fp8.hpp"
#include "swa/params.hpp"

namespace swa::dut::cuda {

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) { return x; }
template <>
__device__ inline __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// N consecutive K or V elements at `element`, as attention reads them with an FP8 KV format: from
// the cache, FP8 codes (one byte each) times the descale; from this call's inputs, the FP8 round
// trip a cache write applies. An FP8 value times a power-of-two descale is exact in T, so T holds it.
template <class T, int N>
__device__ inline void load_fp8_kv(const AttnParams& p, bool in_cache, const T* input, const void* cache,
                                   std::int64_t element, float descale, T (&out)[N]) {
  const bool e4m3 = is_e4m3(p.kv_format);
  if (in_cache) {
    const auto* codes = static_cast<const std::uint8_t*>(cache) + element;
#pragma unroll
    for (int x = 0; x < N; ++x) out[x] = from_float<T>(fp8_to_float(codes[x], e4m3) * descale);
  } else {
#pragma unroll
    for (int x = 0; x < N; ++x) out[x] = from_float<T>(fp8_round_trip(to_float(input[element + x]), e4m3, descale));
  }
}

// A stored K or V element of the cache as fp32: the dtype itself, or an FP8 code (Stored = uint8_t)
// times the descale.
template <class Stored>
__device__ inline float kv_value(Stored x, bool, float) {
  return to_float(x);
}
template <>
__device__ inline float kv_value<std::uint8_t>(std::uint8_t code, bool e4m3, float descale) {
  return fp8_to_float(code, e4m3) * descale;
}

}  // namespace swa::dut::cuda
