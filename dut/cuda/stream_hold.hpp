#pragma once
// Times a call's launches without the host's launch latency, the way nvbench does (its "blocking
// kernel"): a one-thread kernel that spins on a flag in mapped host memory holds the stream while
// the host records the start event and enqueues the launches; releasing the flag lets them run
// back to back, so the events measure the GPU's time alone. Without it the start event fires at
// once and the time includes the host's cudaLaunchKernel calls (several microseconds, which a
// decode step's few tens are not). The spin gives up after kLimitNs, when nothing releases it in
// time (a sanitizer that waits for each kernel to end, a host descheduled that long); the time
// then includes the launch latency, as without the hold (gave_up() says so).
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
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag_), flag_, 0), "cudaHostGetDevicePointer");
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
  void release() {
    int held = 0;  // a hold that gave up (2) stays so
    flag().compare_exchange_strong(held, 1, std::memory_order_seq_cst);
  }
  // After the stream synchronised: whether the last hold ended by itself, not by release().
  bool gave_up() { return flag().load(std::memory_order_seq_cst) == 2; }

 private:
  std::atomic_ref<int> flag() { return std::atomic_ref<int>(*flag_); }
  int* flag_ = nullptr;
  int* device_flag_ = nullptr;
};

}  // namespace swa::dut::cuda
