#include "convert.hpp"

#include <Eigen/Core>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <limits>

#include "isa_setting.hpp"
#include "swa/dut/fp8.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace swa::dut::cpu {
namespace {

// SWA_CPU_ISA=portable takes the fallback on any machine (how the tests cover it on x86-64).
bool forced_portable() { return isa_setting_is("portable"); }

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
  static const bool yes = !forced_portable() && __builtin_cpu_supports("avx2") && cpu_has_f16c();
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

namespace swa::dut::cpu {
namespace {

struct Fp8Table {
  float value[256];
  explicit Fp8Table(bool e4m3) {
    for (int c = 0; c < 256; ++c) value[c] = fp8_to_float(static_cast<std::uint8_t>(c), e4m3);
  }
};

const Fp8Table& fp8_table(bool e4m3) {
  static const Fp8Table e4m3_table(true), e5m2_table(false);
  return e4m3 ? e4m3_table : e5m2_table;
}

}  // namespace

// An e5m2 code is the top byte of the fp16 with the same value; an e4m3 code shifted by 7 is the
// fp16 of its value times 2^-8 (normals and subnormals alike), so the scale takes 2^8. Only e4m3's
// NaN code has no fp16 image. With AVX2 + F16C, 16 codes at a time become fp16 and then fp32.
namespace {

void fp8_portable(const std::uint8_t* src, float* dst, std::int64_t n, bool e4m3, float descale) {
  const float* table = fp8_table(e4m3).value;
  for (std::int64_t i = 0; i < n; ++i) dst[i] = table[src[i]] * descale;
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void fp8_f16c(const std::uint8_t* src, float* dst, std::int64_t n, bool e4m3,
                                                    float descale) {
  const __m256 scale = _mm256_set1_ps(e4m3 ? descale * 256.f : descale);
  const __m256i sign = _mm256_set1_epi16(static_cast<short>(0x8000)), low7 = _mm256_set1_epi16(0x7f);
  const __m128i nan_code = _mm_set1_epi8(0x7f), magnitude = _mm_set1_epi8(0x7f);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    if (e4m3 && _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(codes, magnitude), nan_code)) != 0) {
      fp8_portable(src + i, dst + i, 16, e4m3, descale);
      continue;
    }
    const __m256i wide = _mm256_cvtepu8_epi16(codes);
    const __m256i half = e4m3 ? _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(wide, 8), sign),
                                                _mm256_slli_epi16(_mm256_and_si256(wide, low7), 7))
                              : _mm256_slli_epi16(wide, 8);
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(half)), scale));
    _mm256_storeu_ps(dst + i + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(half, 1)), scale));
  }
  fp8_portable(src + i, dst + i, n - i, e4m3, descale);
}
#endif

}  // namespace

void fp8_to_fp32(const std::uint8_t* src, float* dst, std::int64_t n, bool e4m3, float descale) {
#if defined(__x86_64__)
  if (has_avx2_f16c()) return fp8_f16c(src, dst, n, e4m3, descale);
#endif
  fp8_portable(src, dst, n, e4m3, descale);
}

void fp8_round_trip(float* x, std::int64_t n, bool e4m3, float descale) {
  const float* table = fp8_table(e4m3).value;
  for (std::int64_t i = 0; i < n; ++i) x[i] = table[fp8_from_float(x[i] / descale, e4m3)] * descale;
}

}  // namespace swa::dut::cpu
