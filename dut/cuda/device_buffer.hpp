#pragma once
// Owning device allocation that only grows, and typed host<->device copies through check().
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "cuda_check.hpp"

namespace swa::dut::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);  // nothing to report from a destructor
  }

  // At least `bytes` bytes; the contents are undefined after a growth.
  void* reserve(std::size_t bytes) {
    if (bytes > capacity_) {
      if (ptr_) check(cudaFree(ptr_), "cudaFree");
      ptr_ = nullptr;
      capacity_ = 0;
      check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
      capacity_ = bytes;
    }
    return ptr_;
  }

  // At least `bytes` bytes, zeroed on stream `stream` when they are new (a growth); what the
  // kernels leave in it stays otherwise.
  void* reserve_zeroed(std::size_t bytes, cudaStream_t stream) {
    const bool grows = bytes > capacity_;
    reserve(bytes);
    if (grows) check(cudaMemsetAsync(ptr_, 0, capacity_, stream), "cudaMemsetAsync");
    return ptr_;
  }

  // Copies `bytes` from the host (growing first) and returns the device pointer.
  void* upload(const void* host, std::size_t bytes, cudaStream_t stream) {
    reserve(bytes > 0 ? bytes : 1);
    if (bytes > 0) check(cudaMemcpyAsync(ptr_, host, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D");
    return ptr_;
  }

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace swa::dut::cuda
