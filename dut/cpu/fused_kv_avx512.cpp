// Decode's in-place fp16/bf16 products in 16-lane registers (AVX-512 F/BW/VL), chosen at run time by
// fused_kv.cpp. Half the instructions of the AVX2 kernels per element: the AVX2 kernels ran decode
// at the speed of their arithmetic, below what memory delivers (dut/README.md, issue 21).
#include "fused_kv_kernels.hpp"

#if defined(__x86_64__)
// GCC 12 warns that the intrinsics' own _mm512_undefined_* placeholders may be used uninitialized
// (GCC bug 105593, fixed in GCC 13); the warning is about its header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define SWA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))

namespace swa::dut::cpu::fused::avx512 {
namespace {

// Elements [x, x + 16) of an fp16/bf16 row in fp32; lanes outside `mask` read nothing and are zero.
SWA_AVX512 inline __m512 load16(const std::uint16_t* src, bool bf16, __mmask16 mask) {
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, src);
  if (bf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  return _mm512_cvtph_ps(bits);
}

SWA_AVX512 inline __mmask16 lanes_below(int count) {
  return count >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

// v[0..16) -> one register whose lane i is the sum of v[i]'s lanes (a transpose-and-add tree:
// 45 instructions for 16 sums, where one horizontal sum each takes about 8).
SWA_AVX512 inline __m512 sum_each(const __m512* v) {
  __m512 t[8], u[4], w[2];
  for (int i = 0; i < 8; ++i)
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // u[i]'s 128-bit lane L holds lane L's partial sums of v[4i .. 4i+4).
  for (int i = 0; i < 2; ++i)
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// R (1..4) query rows against four keys per pass: 16 accumulators, each loaded query chunk feeding
// four FMAs; their 16 sums come out of one transpose-and-add tree as row r's four scores in lanes
// [4r, 4r + 4). R is a template argument so that the accumulators stay in registers.
template <int R>
SWA_AVX512 void dots_rows(const float* qg, int d, const std::uint16_t* k, std::int64_t stride, std::int64_t n,
                          bool bf16, float* scores, std::int64_t ld, Prefetch& ahead) {
  constexpr int kKeys = 4;
  Prefetch next = ahead;  // a local copy stays in registers
  std::int64_t j = 0;
  for (; j + kKeys <= n; j += kKeys) {
    const std::uint16_t* row = k + j * stride;
    __m512 acc[4 * kKeys];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int x = 0; x < d; x += 16) {
      const __mmask16 m = lanes_below(d - x);
      __m512 kv[kKeys];
      for (int i = 0; i < kKeys; ++i) kv[i] = load16(row + i * stride + x, bf16, m);
      next.consumed(kKeys * 16 * sizeof(std::uint16_t));
      for (int r = 0; r < R; ++r) {
        const __m512 qv = _mm512_maskz_loadu_ps(m, qg + r * d + x);
        for (int i = 0; i < kKeys; ++i) acc[r * kKeys + i] = _mm512_fmadd_ps(qv, kv[i], acc[r * kKeys + i]);
      }
    }
    alignas(64) float sums[16];
    _mm512_store_ps(sums, sum_each(acc));
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < kKeys; ++i) scores[r * ld + j + i] = sums[r * kKeys + i];
  }
  for (; j < n; ++j) {
    const std::uint16_t* row = k + j * stride;
    __m512 acc[R];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int x = 0; x < d; x += 16) {
      const __mmask16 m = lanes_below(d - x);
      const __m512 kv = load16(row + x, bf16, m);
      next.consumed(16 * sizeof(std::uint16_t));
      for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qg + r * d + x), kv, acc[r]);
    }
    for (int r = 0; r < R; ++r) scores[r * ld + j] = _mm512_reduce_add_ps(acc[r]);
  }
  ahead = next;
}

// C chunks of 16 output columns of R (1..4) rows stay in registers while the n value rows stream
// past; one broadcast weight feeds C FMAs. `last` masks the last chunk's columns (a head size that
// is not a multiple of 16). Each column adds its keys in order with one FMA each, as the AVX2
// kernel's vector columns do.
template <int R, int C>
SWA_AVX512 void accumulate_columns(const float* pg, std::int64_t ld, const std::uint16_t* v, std::int64_t stride,
                                   std::int64_t n, int d, int x, bool bf16, __mmask16 last, float* og,
                                   Prefetch& ahead) {
  Prefetch next = ahead;
  __mmask16 m[C];
  for (int c = 0; c < C; ++c) m[c] = c == C - 1 ? last : __mmask16(0xFFFF);
  __m512 acc[C][R];
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) acc[c][r] = _mm512_maskz_loadu_ps(m[c], og + r * d + x + 16 * c);
  for (std::int64_t j = 0; j < n; ++j) {
    __m512 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = load16(v + j * stride + x + 16 * c, bf16, m[c]);
    next.consumed(C * 16 * sizeof(std::uint16_t));
    for (int r = 0; r < R; ++r) {
      const __m512 w = _mm512_set1_ps(pg[r * ld + j]);
      for (int c = 0; c < C; ++c) acc[c][r] = _mm512_fmadd_ps(w, vv[c], acc[c][r]);
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(og + r * d + x + 16 * c, m[c], acc[c][r]);
  ahead = next;
}

// Value rows are 2 * Hkv * D bytes apart (a cache's slots): blocks of kRowBlock rows stay in L1
// across the column passes, each row read from memory once.
constexpr std::int64_t kRowBlock = 8;

template <int R>
SWA_AVX512 void accumulate_rows(const float* pg, std::int64_t ld, const std::uint16_t* v, std::int64_t stride,
                                std::int64_t n, int d, bool bf16, float* og, Prefetch& ahead) {
  for (std::int64_t j0 = 0; j0 < n; j0 += kRowBlock) {
    const std::int64_t m = n - j0 < kRowBlock ? n - j0 : kRowBlock;
    const std::uint16_t* vb = v + j0 * stride;
    int x = 0;
    for (; x + 64 <= d; x += 64) accumulate_columns<R, 4>(pg + j0, ld, vb, stride, m, d, x, bf16, 0xFFFF, og, ahead);
    for (; x < d; x += 16)
      accumulate_columns<R, 1>(pg + j0, ld, vb, stride, m, d, x, bf16, lanes_below(d - x), og, ahead);
  }
}

}  // namespace

SWA_AVX512 void dots(const float* q, int group, int d, const std::uint16_t* k, std::int64_t stride, std::int64_t n,
                     bool bf16, float* scores, std::int64_t ld, Prefetch& ahead) {
  in_row_blocks(group, [&](auto rows, int g0) {
    dots_rows<rows>(q + static_cast<std::int64_t>(g0) * d, d, k, stride, n, bf16, scores + g0 * ld, ld, ahead);
  });
}

SWA_AVX512 void accumulate(const float* p, std::int64_t ld, int group, const std::uint16_t* v, std::int64_t stride,
                           std::int64_t n, int d, bool bf16, float* out, Prefetch& ahead) {
  in_row_blocks(group, [&](auto rows, int g0) {
    accumulate_rows<rows>(p + g0 * ld, ld, v, stride, n, d, bf16, out + static_cast<std::int64_t>(g0) * d, ahead);
  });
}

}  // namespace swa::dut::cpu::fused::avx512
#endif
