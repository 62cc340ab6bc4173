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

// The instruction paths the CPU DUT uses in this process, each chosen at run time: the level of
// its Eigen kernels (isa_levels.hpp), the fp16/bf16 conversion, decode and bf16 products.
// /meta's cpu_kernels attribute records it.
std::string cpu_kernel_path();

// C = A B, n x n column-major fp32, on the Eigen GEMM of the level the CPU DUT runs: the same-run
// ceiling its kernels are quoted against (so a build without -march=native is not measured
// against an SSE2 GEMM). cpu_sgemm_name() says which ("Eigen, x86-64-v4 avx512f").
void cpu_sgemm(int n, const float* a, const float* b, float* c);
std::string cpu_sgemm_name();

// Why the environment variable SWA_CPU_ISA is refused (an unknown value: the message names it and
// the allowed values), or nothing.
std::optional<std::string> cpu_isa_setting_error();

}  // namespace swa::dut
