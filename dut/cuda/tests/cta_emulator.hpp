#pragma once
// Runs the CUDA kernels' own source on the CPU (compiled with SWA_CUDA_HOST_EMULATION): each CTA
// of a grid is a set of host threads sharing one shared-memory buffer, with __syncthreads as a
// CTA barrier, __syncwarp as a warp barrier, atomicAdd and __threadfence as
// host atomics, __shfl_xor_sync, __shfl_sync and __ballot_sync as warp exchanges, and mma.sync.m16n8k16 computed from the lanes'
// registers through the PTX fragment layouts (mma_fragment.hpp). It checks the kernels' indexing,
// masking, online softmax, register reuse and synchronisation, asynchronous copies landing as late
// as their waits allow; not the tensor cores themselves, nor timing, nor memory ordering beyond the
// barriers.
#include <vector_types.h>

#include <cstddef>
#include <functional>

#define __launch_bounds__(...)

extern thread_local constinit uint3 threadIdx;
extern thread_local constinit uint3 blockIdx;
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);
float __shfl_xor_sync(unsigned mask, float value, int lane_mask);
float __shfl_sync(unsigned mask, float value, int source_lane);
unsigned __ballot_sync(unsigned mask, bool predicate);
[[noreturn]] void __trap();
void __threadfence();
unsigned atomicAdd(unsigned* address, unsigned value);
float __ldcg(const float* address);

namespace swa::dut::cuda::emulator {

void* cta_shared_memory();

// The warp's D += A B for one m16n8k16 tile; every lane of the warp must call it.
template <class T>
void warp_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]);

// cp.async (async_copy.cuh): a copy reads its 16 bytes when issued and lands in shared memory only
// when the issuing thread waits for its group, the latest the hardware allows, so a kernel that
// reads a tile before waiting for it reads the 0xFF bytes of an unwritten buffer, or an older tile.
void copy_16_async(void* shared, const void* global, bool fill);
void commit_async_copies();
void wait_async_copies(int pending);

// Runs body() as CTA (x, y, z) of `grid` for every CTA in turn, `threads` host threads per CTA
// (a multiple of 32), with `shared_bytes` of shared memory filled with 0xFF bytes (NaN in every
// dtype) so a read of shared memory the kernel never wrote shows up.
void launch(dim3 grid, int threads, std::size_t shared_bytes, const std::function<void()>& body);

}  // namespace swa::dut::cuda::emulator
