#pragma once
// Runs the CUDA kernels' own source on the CPU (compiled with SWA_CUDA_HOST_EMULATION): each CTA
// of a grid is a set of host threads sharing one shared-memory buffer, with __syncthreads as a
// CTA barrier, __syncwarp as a warp barrier, atomicAdd and __threadfence as
// host atomics, __shfl_xor_sync, __shfl_sync and __ballot_sync as warp exchanges, mma.sync.m16n8k16
// computed from the lanes' registers through the PTX fragment layouts (mma_fragment.hpp), and
// ldmatrix gathering the rows the lanes name. It checks the kernels' indexing, masking, online
// softmax, register reuse and synchronisation, asynchronous copies landing as late as their waits
// allow, and counts the shared-memory bank conflicts of ldmatrix and cp.async (shared_traffic); not
// the tensor cores themselves, nor timing, nor memory ordering beyond the barriers.
#include <vector_types.h>

#include <cstddef>
#include <functional>

#define __launch_bounds__(...)

extern thread_local constinit uint3 threadIdx;
extern thread_local constinit uint3 blockIdx;
extern thread_local constinit dim3 gridDim;
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

// ldmatrix (ldmatrix.cuh): every lane of the warp must call it; lane l gives row l % 8 of matrix l / 8.
void warp_ldmatrix(unsigned* registers, int matrices, bool transpose, const void* row);

// Shared-memory wavefronts of the warp accesses the emulator sees (ldmatrix reads, cp.async writes),
// from their addresses: the 32 banks of 4 bytes serve one 128-byte wavefront at a time, so 8 lanes'
// 16-byte rows (an ldmatrix matrix, a quarter-warp of 16-byte copies) take one wavefront when they
// fall in 8 distinct groups of 4 banks, and one more per extra distinct row in a group. `minimum` is
// what a conflict-free layout takes; wavefronts - minimum are the conflicts. (Plain C++ loads and
// stores of shared memory are not seen.)
struct SharedTraffic {
  long ldmatrix_wavefronts = 0, ldmatrix_minimum = 0, copy_wavefronts = 0, copy_minimum = 0;
  long conflicts() const { return ldmatrix_wavefronts - ldmatrix_minimum + copy_wavefronts - copy_minimum; }
};
SharedTraffic shared_traffic();
void reset_shared_traffic();

// Runs body() as CTA (x, y, z) of `grid` for every CTA in turn, `threads` host threads per CTA
// (a multiple of 32), with `shared_bytes` of shared memory filled with 0xFF bytes (NaN in every
// dtype) so a read of shared memory the kernel never wrote shows up.
void launch(dim3 grid, int threads, std::size_t shared_bytes, const std::function<void()>& body);

}  // namespace swa::dut::cuda::emulator
