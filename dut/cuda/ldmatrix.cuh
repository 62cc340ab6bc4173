#pragma once
// Warp-wide loads of 8x8 tiles of 16-bit elements from shared memory into the registers of the
// mma.sync.m16n8k16 fragments (ldmatrix, sm_75+). Lane l gives the address of row l % 8 of matrix
// l / 8 (16 contiguous bytes); register i of lane l receives, from matrix i, row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1 — or, with .trans, rows 2 (l % 4) and 2 (l % 4) + 1 of column l / 4.
// The CPU emulation (dut/cuda/tests/cta_emulator.hpp) gathers the lanes' addresses as the
// instruction does and counts the shared-memory bank conflicts they cause.
#include <cuda_fp16.h>  // __device__ and the built-ins, as in the other kernel headers

namespace swa::dut::cuda {

#if defined(SWA_CUDA_HOST_EMULATION)
namespace emulator {
void warp_ldmatrix(unsigned* registers, int matrices, bool transpose, const void* row);
}
#endif

template <int Matrices, bool Transpose>
__device__ inline void ldmatrix(unsigned (&r)[Matrices], const void* row) {
  static_assert(Matrices == 1 || Matrices == 2 || Matrices == 4);
#if defined(SWA_CUDA_HOST_EMULATION)
  emulator::warp_ldmatrix(r, Matrices, Transpose, row);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (Matrices == 4 && !Transpose)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
  else if constexpr (Matrices == 4)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
  else if constexpr (Matrices == 2 && !Transpose)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(at));
  else if constexpr (Matrices == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(at));
  else if constexpr (!Transpose)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(at));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(at));
#else
  __trap();  // built for an architecture without ldmatrix (needs sm_75+)
#endif
}

}  // namespace swa::dut::cuda
