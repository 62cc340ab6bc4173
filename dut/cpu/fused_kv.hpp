#pragma once
// Decode's inner products straight from fp16/bf16 cache rows: each K or V row is converted in
// registers as it is used, never stored as fp32, so a decode step streams the cache once (the
// convert-then-GEMM path reads it, writes an fp32 copy and reads that). AVX2 + F16C + FMA chosen at
// run time; `available()` is false without them (or under SWA_CPU_ISA=portable) and the caller
// keeps the converting path. fp32 accumulation throughout.
#include <cstdint>

namespace swa::dut::cpu::fused {

bool available();

// scores[g * ld + j] = sum_d q[g * d + dx] * k_j[dx] for `group` query rows and keys j < n, key row j
// at k + j * stride (elements). bf16: bfloat16 rows, else fp16.
void dots(const float* q, int group, int d, const std::uint16_t* k, std::int64_t stride, std::int64_t n, bool bf16,
          float* scores, std::int64_t ld);

// out[g * d + dx] += sum_j p[g * ld + j] * v_j[dx], value row j at v + j * stride.
void accumulate(const float* p, std::int64_t ld, int group, const std::uint16_t* v, std::int64_t stride,
                std::int64_t n, int d, bool bf16, float* out);

}  // namespace swa::dut::cpu::fused
