#pragma once
// The warp-wide tensor-core instruction mma.sync.m16n8k16 (fp16/bf16 in, fp32 accumulate, sm_80+)
// and the packing of two fp32 values into one operand register, per storage type. The CPU
// emulation computes the instruction from the lanes' registers (dut/cuda/tests/cta_emulator.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

namespace swa::dut::cuda {

#if defined(SWA_CUDA_HOST_EMULATION)
namespace emulator {
template <class T>
void warp_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]);
}
#endif

template <class T>
struct TensorCoreOps;

template <>
struct TensorCoreOps<__half> {
  __device__ static unsigned pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    unsigned bits;
    memcpy(&bits, &h, sizeof bits);  // not a pointer cast: that breaks strict aliasing
    return bits;
  }
  __device__ static void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(SWA_CUDA_HOST_EMULATION)
    emulator::warp_mma<__half>(d, a, b);
#else
    __trap();  // built for an architecture without m16n8k16 (needs sm_80+)
#endif
  }
};

template <>
struct TensorCoreOps<__nv_bfloat16> {
  __device__ static unsigned pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    unsigned bits;
    memcpy(&bits, &h, sizeof bits);
    return bits;
  }
  __device__ static void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(SWA_CUDA_HOST_EMULATION)
    emulator::warp_mma<__nv_bfloat16>(d, a, b);
#else
    __trap();
#endif
  }
};

}  // namespace swa::dut::cuda
