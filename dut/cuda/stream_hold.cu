// The kernel that holds a stream until the host releases it (stream_hold.hpp).
#include <cstdint>

#include "cuda_check.hpp"
#include "launch.hpp"

namespace swa::dut::cuda {
namespace {

__device__ std::uint64_t global_ns() {
  std::uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// Spins until *flag is not 0, or for limit_ns at most.
__global__ void stream_hold_kernel(const volatile int* flag, std::uint64_t limit_ns) {
  const std::uint64_t start = global_ns();
  while (*flag == 0 && global_ns() - start <= limit_ns) __nanosleep(1000);
}

}  // namespace

void launch_stream_hold(const int* flag, std::uint64_t limit_ns, cudaStream_t stream) {
  stream_hold_kernel<<<1, 1, 0, stream>>>(flag, limit_ns);
  check_launch("stream_hold_kernel");
}

}  // namespace swa::dut::cuda
