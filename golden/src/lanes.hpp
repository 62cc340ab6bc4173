#pragma once
// Internal: four doubles (eight where the build targets AVX-512) as one value (GCC vector extension),
// lowered to whatever SIMD the build targets, and the fused multiply-adds the golden allows itself.
#include <cmath>
#include <cstring>

#if defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace swa::golden::detail {

using Lanes4 = double __attribute__((vector_size(32)));

// Loads, stores and broadcasts for any width of lanes (Lanes4, and Lanes8 below).
template <class L>
inline L load_lanes(const double* p) {
  L v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class L>
inline void store_lanes(double* p, L v) {
  std::memcpy(p, &v, sizeof v);
}
template <class L>
inline L splat_lanes(double x) {  // spelled out: L{} + x makes -0 a +0, and a loop of lane stores
                                  // became eight masked broadcasts
  if constexpr (sizeof(L) == 4 * sizeof(double))
    return L{x, x, x, x};
  else
    return L{x, x, x, x, x, x, x, x};
}
// One TwoSum step on lanes of (sum, err) pairs (golden/include/swa/compensated.hpp, lane by lane).
template <class L>
inline void accumulate_lanes(L& sum, L& err, L x) {
  const L s = sum + x;
  const L z = s - sum;
  err += (sum - (s - z)) + (x - z);
  sum = s;
}

inline Lanes4 load4(const double* p) { return load_lanes<Lanes4>(p); }
inline void store4(double* p, Lanes4 v) { store_lanes(p, v); }
inline Lanes4 splat4(double x) { return splat_lanes<Lanes4>(x); }

// a * b + c for an a * b that is exact (float-valued factors: at most 48 significant bits), so the
// fused and the unfused forms give the same bits; fusing only saves the instruction.
inline Lanes4 add_exact_product(Lanes4 a, Lanes4 b, Lanes4 c) {
#if defined(__FMA__)
  return _mm256_fmadd_pd(a, b, c);
#else
  return a * b + c;
#endif
}

// a * b + c rounded once (a fused multiply-add), for products that are not exact (P.V's weights are
// full doubles): one rounding per term instead of two, and the same bits whether the build targets
// FMA or not (std::fma lane by lane there).
inline Lanes4 fused_multiply_add(Lanes4 a, Lanes4 b, Lanes4 c) {
#if defined(__FMA__)
  return _mm256_fmadd_pd(a, b, c);
#else
  return Lanes4{std::fma(a[0], b[0], c[0]), std::fma(a[1], b[1], c[1]), std::fma(a[2], b[2], c[2]),
                std::fma(a[3], b[3], c[3])};
#endif
}

inline void accumulate4(Lanes4& sum, Lanes4& err, Lanes4 x) { accumulate_lanes(sum, err, x); }

#if defined(__AVX512F__)
// Eight doubles as one value, where the build targets AVX-512 (-march=native on such a machine):
// the kernels that take them do per lane exactly what the four-lane ones do, only twice the lanes
// per instruction, so the bits do not depend on which the build has.
#define SWA_GOLDEN_LANES8 1
using Lanes8 = double __attribute__((vector_size(64)));

inline Lanes8 load8(const double* p) { return load_lanes<Lanes8>(p); }
inline void store8(double* p, Lanes8 v) { store_lanes(p, v); }
inline Lanes8 splat8(double x) { return splat_lanes<Lanes8>(x); }
inline Lanes8 add_exact_product(Lanes8 a, Lanes8 b, Lanes8 c) { return _mm512_fmadd_pd(a, b, c); }
inline Lanes8 fused_multiply_add(Lanes8 a, Lanes8 b, Lanes8 c) { return _mm512_fmadd_pd(a, b, c); }
inline void accumulate8(Lanes8& sum, Lanes8& err, Lanes8 x) { accumulate_lanes(sum, err, x); }
#else
#define SWA_GOLDEN_LANES8 0
#endif

}  // namespace swa::golden::detail
