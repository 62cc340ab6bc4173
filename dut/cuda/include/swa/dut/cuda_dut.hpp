#pragma once
// The CUDA DUT: tensor-core (fp16/bf16) and CUDA-core (fp32) FlashAttention-style prefill, chunked
// prefill through device copies of the ring and linear caches, and split-K decode. Plain C++: the
// harness includes it without a CUDA compiler.
#include <memory>
#include <string>

#include "swa/dut/dut.hpp"

namespace swa::dut {

// "" when a CUDA device can run kernels, else why not ("no CUDA device: ...").
std::string cuda_device_problem();

// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)", or the problem.
std::string cuda_device_description();

// The device's practical memory bandwidth in GB/s, measured now: device-to-device copies of 1 GiB,
// counting the bytes read and written, median of 5 after a warm-up. Throws std::runtime_error.
double measure_cuda_copy_bandwidth_gbps();

// Never throws for a missing device: the DUT then skips every scenario with the reason.
std::unique_ptr<Dut> make_cuda_dut();

}  // namespace swa::dut
