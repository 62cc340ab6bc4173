// Decode's in-place fp16/bf16 products in 8-lane registers (AVX2 + F16C + FMA), chosen at run time by
// fused_kv.cpp where the CPU lacks AVX-512 (or under SWA_CPU_ISA=avx2-decode).
#include "fused_kv_kernels.hpp"

#if defined(__x86_64__)
#include <cstring>
#include <immintrin.h>

namespace swa::dut::cpu::fused::avx2 {
namespace {

__attribute__((target("avx2,f16c,fma"))) inline __m256 load8(const std::uint16_t* src, bool bf16) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  if (bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  return _mm256_cvtph_ps(bits);
}

__attribute__((target("avx2,f16c,fma"))) inline float load1(const std::uint16_t* src, bool bf16) {
  if (bf16) {
    const std::uint32_t bits = static_cast<std::uint32_t>(*src) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  return _cvtsh_ss(*src);
}

__attribute__((target("avx2,f16c,fma"))) inline float hsum(__m256 v) {
  const __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 y = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(y, _mm_movehdup_ps(y)));
}

// R (1..4) query rows share each converted K chunk; R is a template argument so that the
// accumulators stay in registers (a runtime row count put them on the stack: 5x slower). Two keys
// per pass share each loaded query chunk: one query load feeds two FMAs, so loads no longer bound it.
template <int R>
__attribute__((target("avx2,f16c,fma"))) void dots_rows(const float* qg, int d, const std::uint16_t* k,
                                                         std::int64_t stride, std::int64_t n, bool bf16,
                                                         float* scores, std::int64_t ld, Prefetch& ahead) {
  const int vec = d / 8 * 8;
  Prefetch next = ahead;  // a local copy stays in registers
  auto finish = [&](const __m256* acc, const std::uint16_t* row, std::int64_t j) {
    for (int r = 0; r < R; ++r) {
      float s = hsum(acc[r]);
      for (int x = vec; x < d; ++x) s += qg[r * d + x] * load1(row + x, bf16);
      scores[r * ld + j] = s;
    }
  };
  std::int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const std::uint16_t* row0 = k + j * stride;
    const std::uint16_t* row1 = row0 + stride;
    __m256 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    for (int x = 0; x < vec; x += 8) {
      const __m256 k0 = load8(row0 + x, bf16), k1 = load8(row1 + x, bf16);
      next.consumed(2 * 8 * sizeof(std::uint16_t));
      for (int r = 0; r < R; ++r) {
        const __m256 qv = _mm256_loadu_ps(qg + r * d + x);
        acc0[r] = _mm256_fmadd_ps(qv, k0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(qv, k1, acc1[r]);
      }
    }
    finish(acc0, row0, j);
    finish(acc1, row1, j + 1);
  }
  for (; j < n; ++j) {
    const std::uint16_t* row = k + j * stride;
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int x = 0; x < vec; x += 8) {
      const __m256 kv = load8(row + x, bf16);
      next.consumed(8 * sizeof(std::uint16_t));
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + r * d + x), kv, acc[r]);
    }
    finish(acc, row, j);
  }
  ahead = next;
}

// C (1 or 2) chunks of eight output columns of R (1..4) rows stay in registers while the value rows
// stream past; with two chunks one broadcast weight feeds two FMAs.
template <int R, int C>
__attribute__((target("avx2,f16c,fma"))) void accumulate_columns(const float* pg, std::int64_t ld,
                                                                  const std::uint16_t* v, std::int64_t stride,
                                                                  std::int64_t n, int d, int x, bool bf16,
                                                                  float* og, Prefetch& ahead) {
  Prefetch next = ahead;
  __m256 acc[C][R];
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) acc[c][r] = _mm256_loadu_ps(og + r * d + x + 8 * c);
  for (std::int64_t j = 0; j < n; ++j) {
    __m256 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = load8(v + j * stride + x + 8 * c, bf16);
    next.consumed(C * 8 * sizeof(std::uint16_t));
    for (int r = 0; r < R; ++r) {
      const __m256 w = _mm256_broadcast_ss(pg + r * ld + j);
      for (int c = 0; c < C; ++c) acc[c][r] = _mm256_fmadd_ps(w, vv[c], acc[c][r]);
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(og + r * d + x + 8 * c, acc[c][r]);
  ahead = next;
}

// Value rows are 2 * Hkv * D bytes apart, so their cache lines share few L1 sets: a tile's rows do
// not stay in L1 across the column passes. Blocks of kRowBlock rows do; each row is read from
// memory once and from L1 once per column pass.
constexpr std::int64_t kRowBlock = 8;

template <int R>
__attribute__((target("avx2,f16c,fma"))) void accumulate_rows(const float* pg, std::int64_t ld,
                                                               const std::uint16_t* v, std::int64_t stride,
                                                               std::int64_t n, int d, bool bf16, float* og,
                                                               Prefetch& ahead) {
  const int vec = d / 8 * 8;
  for (std::int64_t j0 = 0; j0 < n; j0 += kRowBlock) {
    const std::int64_t m = n - j0 < kRowBlock ? n - j0 : kRowBlock;
    const std::uint16_t* vb = v + j0 * stride;
    int x = 0;
    for (; x + 16 <= vec; x += 16) accumulate_columns<R, 2>(pg + j0, ld, vb, stride, m, d, x, bf16, og, ahead);
    for (; x < vec; x += 8) accumulate_columns<R, 1>(pg + j0, ld, vb, stride, m, d, x, bf16, og, ahead);
  }
  for (int x = vec; x < d; ++x)
    for (int r = 0; r < R; ++r)
      for (std::int64_t j = 0; j < n; ++j) og[r * d + x] += pg[r * ld + j] * load1(v + j * stride + x, bf16);
}

}  // namespace

__attribute__((target("avx2,f16c,fma"))) void dots(const float* q, int group, int d, const std::uint16_t* k,
                                                    std::int64_t stride, std::int64_t n, bool bf16, float* scores,
                                                    std::int64_t ld, Prefetch& ahead) {
  in_row_blocks(group, [&](auto rows, int g0) {
    dots_rows<rows>(q + static_cast<std::int64_t>(g0) * d, d, k, stride, n, bf16, scores + g0 * ld, ld, ahead);
  });
}

__attribute__((target("avx2,f16c,fma"))) void accumulate(const float* p, std::int64_t ld, int group,
                                                          const std::uint16_t* v, std::int64_t stride,
                                                          std::int64_t n, int d, bool bf16, float* out,
                                                          Prefetch& ahead) {
  in_row_blocks(group, [&](auto rows, int g0) {
    accumulate_rows<rows>(p + g0 * ld, ld, v, stride, n, d, bf16, out + static_cast<std::int64_t>(g0) * d, ahead);
  });
}

}  // namespace swa::dut::cpu::fused::avx2
#endif
