#pragma once
// Times a call's launches without the host's launch latency, the way nvbench does (its "blocking
// kernel"): a one-thread kernel that spins on a flag in mapped host memory holds the stream while
// the host records the start event and enqueues the launches; releasing the flag lets them run
// back to back, so the events measure the GPU's time alone. Without it the start event fires at
// once and the time includes the host's cudaLaunchKernel calls (several microseconds, which a
// decode step's few tens are not). The spin gives up after kLimitNs, when nothing releases it in
// time (a sanitizer that waits for each kernel to end, a host descheduled that long); the time
// then includes the launch latency, as without the hold.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "cuda_check.hpp"
#include "launch.hpp"

namespace swa::dut::cuda {

class StreamHold {
 public:
  static constexpr std::uint64_t kLimitNs = 50'000'000;

  StreamHold() {
    check(cudaHostAlloc(reinterpret_cast<void**>(&flag_), sizeof(int), cudaHostAllocMapped), "cudaHostAlloc(stream hold flag)");
    const cudaError_t mapped = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag_), flag_, 0);
    if (mapped != cudaSuccess) {
      cudaFreeHost(flag_);  // the destructor does not run for a constructor that throws
      flag_ = nullptr;
      check(mapped, "cudaHostGetDevicePointer");
    }
  }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  ~StreamHold() {
    if (flag_) cudaFreeHost(flag_);  // nothing to report from a destructor
  }

  // Holds `stream` until release().
  void hold(cudaStream_t stream) {
    flag().store(0, std::memory_order_seq_cst);
    launch_stream_hold(device_flag_, kLimitNs, stream);
  }
  void release() { flag().store(1, std::memory_order_seq_cst); }

 private:
  std::atomic_ref<int> flag() { return std::atomic_ref<int>(*flag_); }
  int* flag_ = nullptr;
  int* device_flag_ = nullptr;  // the same flag, as the device addresses it
};

}  // namespace swa::dut::cuda
