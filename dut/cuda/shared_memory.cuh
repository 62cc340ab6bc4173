#pragma once
// The CTA's dynamic shared memory, as the kernels take it: through this one function, so the CPU
// emulation of the kernels (tests/cta_emulator.hpp, SWA_CUDA_HOST_EMULATION) can stand in for it.
#include <vector_types.h>

namespace swa::dut::cuda {

#if defined(SWA_CUDA_HOST_EMULATION)
namespace emulator {
void* cta_shared_memory();
}
template <class T>
inline T* dynamic_shared() {
  return static_cast<T*>(emulator::cta_shared_memory());
}
#else
template <class T>
__device__ inline T* dynamic_shared() {
  extern __shared__ uint4 swa_dynamic_shared[];
  return reinterpret_cast<T*>(swa_dynamic_shared);
}
#endif

}  // namespace swa::dut::cuda
