#pragma once
// Internal: the instruction-set variants behind fused_kv.hpp's dots and accumulate (same contracts),
// each compiled for its own target and called only where the CPU has it (fused_kv.cpp decides).
#include <cstdint>

#include "fused_kv.hpp"

namespace swa::dut::cpu::fused {

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
