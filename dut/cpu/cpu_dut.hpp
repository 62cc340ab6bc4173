#pragma once
// The optimised OpenMP CPU DUT: tiled FlashAttention-style prefill, chunked prefill through the
// ring and linear caches, and split-K (flash-decoding) decode, fp32/fp16/bf16 storage.
#include <memory>
#include <optional>
#include <string>

#include "swa/dut/dut.hpp"

namespace swa::dut {

struct CpuTuning {
  int query_tile = 64;  // query positions per task (all heads of a GQA group are stacked)
  int key_tile = 128;    // keys per inner tile
};

std::unique_ptr<Dut> make_cpu_dut(CpuTuning tuning = {});

// The instruction paths the CPU DUT uses in this process: Eigen's SIMD sets (fixed at build time,
// -march=native by default) and the fp16/bf16 conversion chosen at run time ("avx2+f16c" or
// "portable"). /meta's cpu_kernels attribute records it.
std::string cpu_kernel_path();

// Why the environment variable SWA_CPU_ISA is refused (an unknown value: the message names it and
// the allowed values), or nothing.
std::optional<std::string> cpu_isa_setting_error();

}  // namespace swa::dut
