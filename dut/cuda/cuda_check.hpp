#pragma once
// Every CUDA runtime call and kernel launch goes through check(): an error becomes a CudaError
// naming the call, which the DUT turns into a failed Status for that scenario.
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace swa::dut::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw CudaError(std::string(what) + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

// After a launch: a bad configuration shows up in cudaGetLastError at once, a fault in the kernel
// at the next synchronisation.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace swa::dut::cuda
