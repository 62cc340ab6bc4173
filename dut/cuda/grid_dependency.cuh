#pragma once
// Programmatic dependent launch (sm_90+): a kernel launched with programmatic stream
// serialization may start while the kernel before it in the stream still runs, and waits for it
// (its completion and its memory) only where it must. A decode step's split kernel sets up its
// queries and key ranges while the cache write before it runs. Elsewhere (older architectures, the
// CPU emulation, a plain launch) both calls do nothing and the stream's order stands.
namespace swa::dut::cuda {

// Blocks until the grids this one depends on have finished and their writes are visible.
__device__ inline void wait_for_preceding_grid() {
#if !defined(SWA_CUDA_HOST_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the next grid in the stream, if launched programmatically, start before this one ends.
__device__ inline void let_dependent_grid_start() {
#if !defined(SWA_CUDA_HOST_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace swa::dut::cuda
