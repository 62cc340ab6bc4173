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
SWA_AVX512 inline __m512 convert16(__m256i bits, bool bf16) {
  if (bf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  return _mm512_cvtph_ps(bits);
}

SWA_AVX512 inline __m512 load16(const std::uint16_t* src, bool bf16, __mmask16 mask) {
  return convert16(_mm256_maskz_loadu_epi16(mask, src), bf16);
}

// All 16 elements (a whole chunk): a plain load, which the conversion takes as its memory operand.
SWA_AVX512 inline __m512 load16(const std::uint16_t* src, bool bf16) {
  return convert16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), bf16);
}

// The two lines for the 128 bytes of rows just consumed (Prefetch::take).
SWA_AVX512 inline void ask_for_two_lines(const char*& lines) {
  __builtin_prefetch(lines, 0, 3);
  __builtin_prefetch(lines + 64, 0, 3);
  lines += 128;
}

// Calls f(bf16, ask) with both as compile-time constants (std::bool_constant), for the whole-chunk
// loops' template arguments.
template <class F>
SWA_AVX512 inline void with_constants(bool bf16, bool ask, F&& f) {
  using Yes = std::true_type;
  using No = std::false_type;
  if (bf16) {
    if (ask) f(Yes{}, Yes{});
    else f(Yes{}, No{});
  } else {
    if (ask) f(No{}, Yes{});
    else f(No{}, No{});
  }
}

// Row r's four scores leave `sums` (lanes [4r, 4r + 4), sum_each's order) as one 128-bit store.
template <int R>
SWA_AVX512 inline void store_scores(__m512 sums, float* scores, std::int64_t ld) {
  _mm_storeu_ps(scores, _mm512_castps512_ps128(sums));
  if constexpr (R > 1) _mm_storeu_ps(scores + ld, _mm512_extractf32x4_ps(sums, 1));
  if constexpr (R > 2) _mm_storeu_ps(scores + 2 * ld, _mm512_extractf32x4_ps(sums, 2));
  if constexpr (R > 3) _mm_storeu_ps(scores + 3 * ld, _mm512_extractf32x4_ps(sums, 3));
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

constexpr int kKeys = 4;

// R (1..4) query rows against four keys per pass: 16 accumulators, each loaded query chunk feeding
// four FMAs; their 16 sums come out of one transpose-and-add tree as row r's four scores in lanes
// [4r, 4r + 4). R is a template argument so that the accumulators stay in registers, and so are the
// dtype (a run-time one costs a test and a branch per chunk) and Masked: head sizes that are not a
// multiple of 16 mask their last chunk, the others take plain loads. n is a multiple of four; with
// Ask, the pass asks for two lines of `lines` per 16-element chunk of four keys (128 bytes).
template <int R, bool Bf16, bool Ask, bool Masked>
SWA_AVX512 void dots_four_key_passes(const float* qg, int d, const std::uint16_t* k, std::int64_t stride,
                                     std::int64_t n, float* scores, std::int64_t ld, const char* lines) {
  for (std::int64_t j = 0; j < n; j += kKeys) {
    const std::uint16_t* row = k + j * stride;
    __m512 acc[4 * kKeys];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int x = 0; x < d; x += 16) {
      const __mmask16 m = Masked ? lanes_below(d - x) : __mmask16(0xFFFF);
      __m512 kv[kKeys];
      for (int i = 0; i < kKeys; ++i)
        kv[i] = Masked ? load16(row + i * stride + x, Bf16, m) : load16(row + i * stride + x, Bf16);
      if constexpr (Ask) ask_for_two_lines(lines);
      for (int r = 0; r < R; ++r) {
        const __m512 qv = Masked ? _mm512_maskz_loadu_ps(m, qg + r * d + x) : _mm512_loadu_ps(qg + r * d + x);
        for (int i = 0; i < kKeys; ++i) acc[r * kKeys + i] = _mm512_fmadd_ps(qv, kv[i], acc[r * kKeys + i]);
      }
    }
    store_scores<R>(sum_each(acc), scores + j, ld);
  }
}

// Any head size and key count: the four-key passes, then the last n % 4 keys one at a time with the
// prefetch walk kept per chunk.
template <int R>
SWA_AVX512 void dots_rows(const float* qg, int d, const std::uint16_t* k, std::int64_t stride, std::int64_t n,
                          bool bf16, float* scores, std::int64_t ld, Prefetch& ahead) {
  std::int64_t j = n / kKeys * kKeys;
  const std::size_t chunks = static_cast<std::size_t>(d + 15) / 16;
  const char* lines = ahead.take(static_cast<std::size_t>(j / kKeys) * chunks * 128);
  with_constants(bf16, lines != nullptr, [&](auto bf16_rows, auto ask) {
    if (d % 16 == 0) dots_four_key_passes<R, bf16_rows, ask, false>(qg, d, k, stride, j, scores, ld, lines);
    else dots_four_key_passes<R, bf16_rows, ask, true>(qg, d, k, stride, j, scores, ld, lines);
  });
  Prefetch next = ahead;  // a local copy stays in registers
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

// accumulate_columns' 64-column pass without masks, the dtype a template argument; with Ask, two
// lines of `lines` per value row (128 bytes consumed).
template <int R, bool Bf16, bool Ask>
SWA_AVX512 void accumulate_64_columns(const float* pg, std::int64_t ld, const std::uint16_t* v, std::int64_t stride,
                                      std::int64_t n, int d, float* og, const char* lines) {
  constexpr int C = 4;
  __m512 acc[C][R];
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) acc[c][r] = _mm512_loadu_ps(og + r * d + 16 * c);
  for (std::int64_t j = 0; j < n; ++j) {
    __m512 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = load16(v + j * stride + 16 * c, Bf16);
    if constexpr (Ask) ask_for_two_lines(lines);
    for (int r = 0; r < R; ++r) {
      const __m512 w = _mm512_set1_ps(pg[r * ld + j]);
      for (int c = 0; c < C; ++c) acc[c][r] = _mm512_fmadd_ps(w, vv[c], acc[c][r]);
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(og + r * d + 16 * c, acc[c][r]);
}

// Value rows are 2 * Hkv * D bytes apart (a cache's slots): blocks of kRowBlock rows stay in L1
// across the column passes, each row read from memory once.
constexpr std::int64_t kRowBlock = 8;

// Head sizes that are multiples of 64: every pass is accumulate_64_columns.
template <int R, bool Bf16, bool Ask>
SWA_AVX512 void accumulate_rows_64(const float* pg, std::int64_t ld, const std::uint16_t* v, std::int64_t stride,
                                   std::int64_t n, int d, float* og, const char* lines) {
  for (std::int64_t j0 = 0; j0 < n; j0 += kRowBlock) {
    const std::int64_t m = n - j0 < kRowBlock ? n - j0 : kRowBlock;
    for (int x = 0; x < d; x += 64) {
      accumulate_64_columns<R, Bf16, Ask>(pg + j0, ld, v + j0 * stride + x, stride, m, d, og + x, lines);
      if constexpr (Ask) lines += m * 128;
    }
  }
}

template <int R>
SWA_AVX512 void accumulate_rows(const float* pg, std::int64_t ld, const std::uint16_t* v, std::int64_t stride,
                                std::int64_t n, int d, bool bf16, float* og, Prefetch& ahead) {
  if (d % 64 == 0) {
    const char* lines = ahead.take(static_cast<std::size_t>(n) * d * sizeof(std::uint16_t));
    with_constants(bf16, lines != nullptr, [&](auto bf16_rows, auto ask) {
      accumulate_rows_64<R, bf16_rows, ask>(pg, ld, v, stride, n, d, og, lines);
    });
    return;
  }
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
