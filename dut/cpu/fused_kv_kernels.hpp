#pragma once
// Internal: the instruction-set variants behind fused_kv.hpp's dots and accumulate (same contracts),
// each compiled for its own target and called only where the CPU has it (fused_kv.cpp decides).
#include <cstdint>
#include <type_traits>

#include "fused_kv.hpp"

namespace swa::dut::cpu::fused {

// Calls rows(R, g0) for the query rows of a GQA group in blocks of up to four, g0 the block's first
// row and R its row count as a compile-time constant (std::integral_constant), so that each kernel's
// accumulators for R rows stay in registers.
template <class Rows>
void in_row_blocks(int group, Rows&& rows) {
  for (int g0 = 0; g0 < group; g0 += 4) {
    switch (group - g0 < 4 ? group - g0 : 4) {
      case 1: rows(std::integral_constant<int, 1>{}, g0); break;
      case 2: rows(std::integral_constant<int, 2>{}, g0); break;
      case 3: rows(std::integral_constant<int, 3>{}, g0); break;
      default: rows(std::integral_constant<int, 4>{}, g0); break;
    }
  }
}

namespace avx2 {
void dots(const float* q, int group, int d, const std::uint16_t* k, std::int64_t stride, std::int64_t n, bool bf16,
          float* scores, std::int64_t ld, Prefetch& ahead);
void accumulate(const float* p, std::int64_t ld, int group, const std::uint16_t* v, std::int64_t stride,
                std::int64_t n, int d, bool bf16, float* out, Prefetch& ahead);
}  // namespace avx2

namespace avx512 {
void dots(const float* q, int group, int d, const std::uint16_t* k, std::int64_t stride, std::int64_t n, bool bf16,
          float* scores, std::int64_t ld, Prefetch& ahead);
void accumulate(const float* p, std::int64_t ld, int group, const std::uint16_t* v, std::int64_t stride,
                std::int64_t n, int d, bool bf16, float* out, Prefetch& ahead);
}  // namespace avx512

}  // namespace swa::dut::cpu::fused
