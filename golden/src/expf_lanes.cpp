#include "expf_lanes.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SWA_EXPF_LANES 1
#else
#define SWA_EXPF_LANES 0
#endif

namespace swa::golden::detail {
namespace {

#if SWA_EXPF_LANES
// glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, from Arm's optimized-routines): with N = 32,
// x * N / ln 2 = k + r, exp(x) = 2^(k/N) * (C0 r^3 + C1 r^2 + C2 r + 1), 2^(k/N) from a table of
// 2^(i/N) as double bit patterns less i << 47, so that adding k << 47 puts k / N into the exponent.
constexpr std::uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
constexpr double kInvLn2N = 0x1.71547652b82fep+0 * 32;
constexpr double kShift = 0x1.8p+52;  // adding it rounds to an integer, ties to even, in the low bits
constexpr double kC0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32;
constexpr double kC1 = 0x1.ebfce50fac4f3p-3 / 32 / 32;
constexpr double kC2 = 0x1.62e42ff0c52d6p-1 / 32;

// Four lanes of expf, each operation the one glibc's FMA build executes (vfmadd/vfmsub where it
// fuses, a plain multiply where it does not). Lanes must hold |x| < 88 (no overflow, no underflow
// path).
__m128 exp4(__m128 x) {
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d inv_ln2_n = _mm256_set1_pd(kInvLn2N), shift = _mm256_set1_pd(kShift);
  const __m256d shifted = _mm256_fmadd_pd(inv_ln2_n, xd, shift);
  const __m256i ki = _mm256_castpd_si256(shifted);
  const __m256d kd = _mm256_sub_pd(shifted, shift);
  const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
  const __m256i index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable), index, 8),
                                     _mm256_slli_epi64(ki, 47));
  const __m256d s = _mm256_castsi256_pd(t);
  const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(kC0), _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(kC2), _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(z, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

// Eight differences x - m, each rounded to float as the scalar expression does; false when a lane
// needs glibc's special cases (|x - m| >= 88: its top twelve bits at least those of 88; inf, NaN).
bool differences8(const float* x, float m, __m256& d) {
  d = _mm256_sub_ps(_mm256_loadu_ps(x), _mm256_set1_ps(m));
  const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(d), 20), _mm256_set1_epi32(0x7ff));
  return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a)))) == 0;
}

void exp_lanes(float* x, std::size_t n, float m) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 d;
    if (!differences8(x + i, m, d)) {
      for (std::size_t j = i; j < i + 8; ++j) x[j] = std::exp(x[j] - m);
      continue;
    }
    const __m128 lo = exp4(_mm256_castps256_ps128(d)), hi = exp4(_mm256_extractf128_ps(d, 1));
    _mm256_storeu_ps(x + i, _mm256_set_m128(hi, lo));
  }
  for (; i < n; ++i) x[i] = std::exp(x[i] - m);
}

// The eight-lane path against std::exp on every 4099th float pattern below 88 in magnitude, both
// signs: glibc's expf is this algorithm on every x86-64 build since 2.28, but a libm that is not, or
// a CPU without FMA where glibc runs its non-fused variant, would round some lanes otherwise.
bool lanes_match_std_exp() {
  float probe[8];
  for (std::uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099 * 8) {
    float want[8];
    int count = 0;
    for (int l = 0; l < 8; ++l) {
      const float v = std::bit_cast<float>(static_cast<std::uint32_t>(bits + 4099 * l));
      if (!(std::fabs(v) < 88.f)) continue;
      probe[count] = v;
      want[count] = std::exp(v);
      ++count;
    }
    for (int l = count; l < 8; ++l) probe[l] = 0.f, want[l] = 1.f;
    exp_lanes(probe, 8, 0.f);
    if (std::memcmp(probe, want, sizeof want) != 0) return false;
  }
  return true;
}
#endif

}  // namespace

bool exp_lanes_in_use() {
#if SWA_EXPF_LANES
  static const bool ok = lanes_match_std_exp();
  return ok;
#else
  return false;
#endif
}

void exp_of_differences(float* x, std::size_t n, float m) {
#if SWA_EXPF_LANES
  if (exp_lanes_in_use()) {
    exp_lanes(x, n, m);
    return;
  }
#endif
  for (std::size_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - m);
}

}  // namespace swa::golden::detail
