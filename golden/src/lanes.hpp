#pragma once
// Internal: four or eight doubles as one value (GCC vector extension), lowered to whatever SIMD the
// build targets (eight lanes are one AVX-512 register, two AVX2 ones), and the one fused
// multiply-add the golden allows itself. Every lane does the same arithmetic as a scalar would, so
// the width never changes a bit.
#include <cstddef>
#include <cstring>

#if defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace swa::golden::detail {

using Lanes4 = double __attribute__((vector_size(32)));
using Lanes8 = double __attribute__((vector_size(64)));

template <class L>
inline L load(const double* p) {
  L v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class L>
inline void store(double* p, L v) {
  std::memcpy(p, &v, sizeof v);
}
template <class L>
inline L splat(double x) {
  L v;
  for (std::size_t i = 0; i < sizeof v / sizeof x; ++i) v[i] = x;
  return v;
}

// a * b + c for an a * b that is exact (float-valued factors: at most 48 significant bits), so the
// fused and the unfused forms give the same bits; fusing only saves the instruction.
inline Lanes4 add_exact_product(Lanes4 a, Lanes4 b, Lanes4 c) {
#if defined(__FMA__)
  return _mm256_fmadd_pd(a, b, c);
#else
  return a * b + c;
#endif
}
inline Lanes8 add_exact_product(Lanes8 a, Lanes8 b, Lanes8 c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_pd(a, b, c);
#else
  return a * b + c;
#endif
}

// One TwoSum step on lanes of (sum, err) pairs (golden/include/swa/compensated.hpp, lane by lane).
template <class L>
inline void accumulate_lanes(L& sum, L& err, L x) {
  const L s = sum + x;
  const L z = s - sum;
  err += (sum - (s - z)) + (x - z);
  sum = s;
}

}  // namespace swa::golden::detail
