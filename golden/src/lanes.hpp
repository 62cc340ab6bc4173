#pragma once
// Internal: four or eight doubles as one value (GCC vector extension), lowered to whatever SIMD the
// build targets (eight lanes are one AVX-512 register, two AVX2 ones), and the one fused
// multiply-add the golden allows itself. Every lane does the same arithmetic as a scalar would, so
// the width never changes a bit.
#include <cstring>

#if defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace swa::golden::detail {

using Lanes4 = double __attribute__((vector_size(32)));

inline Lanes4 load4(const double* p) {
  Lanes4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(double* p, Lanes4 v) { std::memcpy(p, &v, sizeof v); }
inline Lanes4 splat4(double x) { return Lanes4{x, x, x, x}; }

// a * b + c for an a * b that is exact (float-valued factors: at most 48 significant bits), so the
// fused and the unfused forms give the same bits; fusing only saves the instruction.
inline Lanes4 add_exact_product(Lanes4 a, Lanes4 b, Lanes4 c) {
#if defined(__FMA__)
  return _mm256_fmadd_pd(a, b, c);
#else
  return a * b + c;
#endif
}

// One TwoSum step on lanes of (sum, err) pairs (golden/include/swa/compensated.hpp, lane by lane).
inline void accumulate4(Lanes4& sum, Lanes4& err, Lanes4 x) {
  const Lanes4 s = sum + x;
  const Lanes4 z = s - sum;
  err += (sum - (s - z)) + (x - z);
  sum = s;
}

using Lanes8 = double __attribute__((vector_size(64)));

inline Lanes8 load8(const double* p) {
  Lanes8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(double* p, Lanes8 v) { std::memcpy(p, &v, sizeof v); }
inline Lanes8 splat8(double x) { return Lanes8{x, x, x, x, x, x, x, x}; }

inline Lanes8 add_exact_product(Lanes8 a, Lanes8 b, Lanes8 c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_pd(a, b, c);
#else
  return a * b + c;
#endif
}

inline void accumulate8(Lanes8& sum, Lanes8& err, Lanes8 x) {
  const Lanes8 s = sum + x;
  const Lanes8 z = s - sum;
  err += (sum - (s - z)) + (x - z);
  sum = s;
}

}  // namespace swa::golden::detail
