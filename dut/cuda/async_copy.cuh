#pragma once
// Global -> shared copies that run while the CTA computes (cp.async, sm_80+): the bytes in flight
// cost no registers. The CPU emulation (dut/cuda/tests/cta_emulator.hpp) lands each copy only when
// its group is waited for.
#include <cstring>

namespace swa::dut::cuda {

// 16 bytes from `global` to `shared`, or 16 zero bytes when `fill` is false (nothing is read then).
__device__ inline void copy_16_async(void* shared, const void* global, bool fill) {
#if defined(SWA_CUDA_HOST_EMULATION)
  emulator::copy_16_async(shared, global, fill);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned destination = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(global),
               "r"(fill ? 16 : 0)
               : "memory");
#else
  __trap();  // built for an architecture without cp.async (needs sm_80+)
#endif
}

// Closes the group of copies issued since the last commit.
__device__ inline void commit_async_copies() {
#if defined(SWA_CUDA_HOST_EMULATION)
  emulator::commit_async_copies();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `Pending` committed groups of this thread are still in flight; a barrier
// after it makes every thread's finished copies visible to the CTA.
template <int Pending>
__device__ inline void wait_async_copies() {
#if defined(SWA_CUDA_HOST_EMULATION)
  emulator::wait_async_copies(Pending);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

}  // namespace swa::dut::cuda
