#pragma once
// 2^x on the special-function unit, denormal results flushed to zero: what --use_fast_math makes of
// exp2f, one MUFU.EX2 instead of exp2f's range fix-ups around it. Its error (2 ulp) is far below the
// fp16/bf16 rounding P goes through, and a flushed result is below 2^-126 of a row's largest term.
// 2^-inf is +0, as the online softmax needs. The CPU emulation uses exp2f.
#include <cmath>

namespace swa::dut::cuda {

__device__ inline float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

}  // namespace swa::dut::cuda
