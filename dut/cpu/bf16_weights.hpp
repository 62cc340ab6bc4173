#pragma once
// Softmax weights for the bf16 tile products (amx_bf16.hpp): one row's exp(s - shift), rounded to
// bf16 and written as bits, and their sum, in one pass, with AVX-512 (every CPU with AMX-BF16 or
// AVX512-BF16 has it). The flash tile's x86-64-v4 level calls it; tests/test_cpu.cpp checks it
// against an fp64 loop. Callers check the CPU (or build) has AVX512F.
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>

namespace swa::dut::cpu::bf16_weights {

// exp(x) for x <= 0 (or NaN) to a relative error of 2.7e-6 + 1.2e-7 |x| (the fit's, then the fp32
// product x log2 e's; at most 1.3e-5 where exp is a normal float): the weights are about to be
// rounded to bf16, whose relative step (2^-8) is 1450 times coarser than the weights near the row's
// maximum err. 2^(x log2 e) as 2^n times a degree-4 fit of 2^f on f in [-1/2, 1/2], about half of
// Eigen's pexp's instructions. Below 2^-150 it is 0 (a
// masked key's -inf included, where pexp leaves 3e-39); NaN stays NaN (vmaxps returns its second
// operand when either is NaN).
__attribute__((target("avx512f"))) inline __m512 exp_of(__m512 x) {
  const __m512 t = _mm512_max_ps(_mm512_set1_ps(-150.f), _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 y = _mm512_set1_ps(0.009560519829392433f);
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.05591712146997452f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.24024981260299683f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.6931219696998596f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.9999991655349731f));
  return _mm512_scalef_ps(y, n);
}

// bits[c] = bf16 of exp(scores[c] - shift), rounded to nearest even, for c < cols (a multiple of 16);
// returns the sum of the rounded weights (16 lanes, then across them).
__attribute__((target("avx512f"))) inline float round_row(const float* scores, std::int64_t cols, float shift,
                                                          std::uint16_t* bits) {
  const __m512 s = _mm512_set1_ps(shift);
  const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  __m512 sums = _mm512_setzero_ps();
  for (std::int64_t c = 0; c < cols; c += 16) {
    const __m512i e = _mm512_castps_si512(exp_of(_mm512_sub_ps(_mm512_loadu_ps(scores + c), s)));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(e, 16), one);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(e, _mm512_add_epi32(half, odd)), 16);
    sums = _mm512_add_ps(sums, _mm512_castsi512_ps(_mm512_slli_epi32(rounded, 16)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bits + c), _mm512_cvtepi32_epi16(rounded));
  }
  return _mm512_reduce_add_ps(sums);
}

// max(scores[0..cols)), cols a multiple of 16.
__attribute__((target("avx512f"))) inline float row_max(const float* scores, std::int64_t cols, float start) {
  __m512 m = _mm512_set1_ps(start);
  for (std::int64_t c = 0; c < cols; c += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(scores + c));
  return _mm512_reduce_max_ps(m);
}

}  // namespace swa::dut::cpu::bf16_weights

#endif
