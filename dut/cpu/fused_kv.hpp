#pragma once
// Decode's inner products straight from fp16/bf16 cache rows: each K or V row is converted in
// registers as it is used, never stored as fp32, so a decode step streams the cache once (the
// convert-then-GEMM path reads it, writes an fp32 copy and reads that). Chosen at run time: AVX-512
// (F, BW, VL) where the CPU has it, else AVX2 + F16C + FMA (also under SWA_CPU_ISA=avx2-decode);
// `available()` is false without AVX2 + F16C + FMA (or under SWA_CPU_ISA=portable) and the caller
// keeps the converting path. fp32 accumulation throughout.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace swa::dut::cpu::fused {

bool available();

// The chosen path, for /meta: "fused avx512f+bw+vl", "fused avx2+f16c+fma" or "converted, then GEMM".
const char* path_name();

// Memory a kernel asks for while it works: one 64-byte line for each 64 bytes of its own rows it has
// consumed, front to back, until the range ends. A load waiting on memory holds every instruction
// that needs its value, and enough of those fill the core's scheduler so that no further load issues;
// a prefetch holds nothing. Spread one line at a time through the arithmetic, prefetches keep the
// next block's misses in flight (bursts of them stall as the fill buffers run out).
class Prefetch {
 public:
  Prefetch() = default;
  Prefetch(const void* from, std::size_t bytes)
      : next_(static_cast<const char*>(from)), end_(from ? next_ + bytes : nullptr) {}
  void consumed(std::size_t bytes) {
    owed_ += bytes;
    for (; owed_ >= kLine && next_ < end_; owed_ -= kLine, next_ += kLine) __builtin_prefetch(next_, 0, 3);
  }

  // For kernels that ask for a line per 64 bytes consumed at fixed points of their loops, with no
  // per-line test or count: where the lines for the next `bytes` consumed start, or nullptr if the
  // range is spent. The kernel asks for all of them without a bound check, so a range shorter than
  // `bytes` has it ask for the lines just past the range (a prefetch never faults; decode's next
  // block is as long as the one consumed unless a page ends within it). The range moves on by
  // `bytes`.
  const char* take(std::size_t bytes) {
    if (next_ >= end_) return nullptr;
    const char* at = next_;
    next_ += std::min<std::size_t>(bytes, static_cast<std::size_t>(end_ - next_));
    return at;
  }

 private:
  static constexpr std::size_t kLine = 64;
  const char* next_ = nullptr;
  const char* end_ = nullptr;
  std::size_t owed_ = 0;
};

// scores[g * ld + j] = sum_d q[g * d + dx] * k_j[dx] for `group` query rows and keys j < n, key row j
// at k + j * stride (elements). bf16: bfloat16 rows, else fp16.
void dots(const float* q, int group, int d, const std::uint16_t* k, std::int64_t stride, std::int64_t n, bool bf16,
          float* scores, std::int64_t ld, Prefetch ahead = {});

// out[g * d + dx] += sum_j p[g * ld + j] * v_j[dx], value row j at v + j * stride.
void accumulate(const float* p, std::int64_t ld, int group, const std::uint16_t* v, std::int64_t stride,
                std::int64_t n, int d, bool bf16, float* out, Prefetch ahead = {});

}  // namespace swa::dut::cpu::fused
