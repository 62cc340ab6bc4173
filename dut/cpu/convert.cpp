#include "convert.hpp"

#include <Eigen/Core>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace swa::dut::cpu {
namespace {

// SWA_CPU_ISA=portable takes the fallback on any machine (how the tests cover it on x86-64).
bool forced_portable() {
  const char* isa = std::getenv("SWA_CPU_ISA");
  return isa && std::string_view(isa) == "portable";
}

void fp16_portable(const std::uint16_t* src, float* dst, std::int64_t n, float scale) {
  for (std::int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(src[i])) * scale;
}

void bf16_portable(const std::uint16_t* src, float* dst, std::int64_t n, float scale) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(src[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    dst[i] = f * scale;
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void fp16_f16c(const std::uint16_t* src, float* dst, std::int64_t n,
                                                     float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))), s));
  fp16_portable(src + i, dst + i, n - i, scale);
}

__attribute__((target("avx2"))) void bf16_avx2(const std::uint16_t* src, float* dst, std::int64_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)), s));
  }
  bf16_portable(src + i, dst + i, n - i, scale);
}

bool has_avx2_f16c() {
  static const bool yes = !forced_portable() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}
#else
bool has_avx2_f16c() { return false; }
#endif

}  // namespace

void fp16_to_fp32(const std::uint16_t* src, float* dst, std::int64_t n, float scale) {
#if defined(__x86_64__)
  if (has_avx2_f16c()) return fp16_f16c(src, dst, n, scale);
#endif
  fp16_portable(src, dst, n, scale);
}

void bf16_to_fp32(const std::uint16_t* src, float* dst, std::int64_t n, float scale) {
#if defined(__x86_64__)
  if (has_avx2_f16c()) return bf16_avx2(src, dst, n, scale);
#endif
  bf16_portable(src, dst, n, scale);
}

std::string_view conversion_path() { return has_avx2_f16c() ? "avx2+f16c" : "portable"; }

}  // namespace swa::dut::cpu
