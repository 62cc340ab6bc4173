#include "avx512_bf16.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define SWA_AVX512_BF16_BUILD 1
#endif

namespace swa::dut::cpu::avx512_bf16 {
namespace {

constexpr int kBlockKeys = 32;
// Query rows per pass: 8 rows x 32 columns of fp32 sums are 16 of the 32 ZMM registers, beside the
// two operand loads and a broadcast.
constexpr int kRows = 8;

}  // namespace

#if defined(SWA_AVX512_BF16_BUILD)

bool cpu_supports() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xE6u) != 0xE6u) return false;  // the OS saves SSE, AVX, opmask and both ZMM halves
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 16) & 1u)) return false;  // AVX512F
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return (a >> 5) & 1u;  // AVX512_BF16
}

bool beats_fp32_fma() {
  unsigned max_leaf = 0, vendor[3] = {};
  __cpuid(0, max_leaf, vendor[0], vendor[2], vendor[1]);  // ebx, edx, ecx spell the vendor
  return std::memcmp(vendor, "AuthenticAMD", 12) == 0;
}

namespace {

using Pairs = __m512bh;

__attribute__((target("avx512f,avx512bf16"))) inline Pairs load_pairs(const std::uint16_t* p) {
  return reinterpret_cast<Pairs>(_mm512_loadu_si512(p));
}

__attribute__((target("avx512f,avx512bf16"))) inline Pairs broadcast_pair(const std::uint16_t* p) {
  std::int32_t pair;
  std::memcpy(&pair, p, sizeof pair);
  return reinterpret_cast<Pairs>(_mm512_set1_epi32(pair));
}

// C[8 rows][32] = A[8 rows][2 * pairs] x B[pairs][32][2]: a row's pair broadcast against 32 columns'
// pairs (two registers), `pairs` times. a_stride: elements between A's rows; b_step: between B's pairs.
__attribute__((target("avx512f,avx512bf16"))) void rows_x_32(const std::uint16_t* a, std::int64_t a_stride,
                                                              const std::uint16_t* b, std::int64_t b_step,
                                                              std::int64_t pairs, __m512 (&c)[kRows][2]) {
  for (auto& row : c) row[0] = row[1] = _mm512_setzero_ps();
  for (std::int64_t s = 0; s < pairs; ++s) {
    const Pairs b0 = load_pairs(b + s * b_step), b1 = load_pairs(b + s * b_step + 32);
    for (int r = 0; r < kRows; ++r) {
      const Pairs ar = broadcast_pair(a + r * a_stride + 2 * s);
      c[r][0] = _mm512_dpbf16_ps(c[r][0], ar, b0);
      c[r][1] = _mm512_dpbf16_ps(c[r][1], ar, b1);
    }
  }
}

}  // namespace

__attribute__((target("avx512f,avx512bf16"))) void tile_scores(const amx::PackedQueries& q, const amx::PackedKeys& keys,
                                                                std::int64_t first_block, std::int64_t block_count,
                                                                float* scores) {
  const std::int64_t cols = block_count * kBlockKeys;
  const std::int64_t k_block = static_cast<std::int64_t>(keys.dims / 2) * kBlockKeys * 2;
  // Rows past q.rows are zero in the packed queries (padded_rows is a multiple of 32, so of kRows).
  const std::int64_t rows = (q.rows + kRows - 1) / kRows * kRows;
  __m512 c[kRows][2];
  for (std::int64_t j = 0; j < block_count; ++j) {  // a key block (8 KB at D 128) stays in L1 across the rows
    const std::uint16_t* kb = keys.k.data() + (first_block + j) * k_block;
    for (std::int64_t r0 = 0; r0 < rows; r0 += kRows) {
      rows_x_32(q.q.data() + r0 * q.dims, q.dims, kb, kBlockKeys * 2, keys.dims / 2, c);
      for (int r = 0; r < kRows; ++r) {
        _mm512_storeu_ps(scores + (r0 + r) * cols + j * kBlockKeys, c[r][0]);
        _mm512_storeu_ps(scores + (r0 + r) * cols + j * kBlockKeys + 16, c[r][1]);
      }
    }
  }
  std::fill(scores + rows * cols, scores + q.padded_rows * cols, 0.f);
}

__attribute__((target("avx512f,avx512bf16"))) void add_weighted_values(const std::uint16_t* p, std::int64_t rows,
                                                                        std::int64_t cols, const amx::PackedKeys& keys,
                                                                        std::int64_t first_block, float* out) {
  const int vd = keys.value_dims, d = keys.head_size;
  // Key blocks are 16 key pairs x value dims each, back to back: pair g of the run is row g of
  // [pairs][value dims][2].
  const std::uint16_t* v = keys.v.data() + first_block * static_cast<std::int64_t>(kBlockKeys / 2) * vd * 2;
  __m512 c[kRows][2];
  for (std::int64_t r0 = 0; r0 < rows; r0 += kRows)
    for (int n0 = 0; n0 < vd; n0 += 32) {
      rows_x_32(p + r0 * cols, cols, v + n0 * 2, static_cast<std::int64_t>(vd) * 2, cols / 2, c);
      for (int r = 0; r < kRows && r0 + r < rows; ++r)
        for (int u = 0; u < 2; ++u) {
          const int n = n0 + 16 * u, left = d - n;
          if (left <= 0) break;
          const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
          float* o = out + (r0 + r) * d + n;
          _mm512_mask_storeu_ps(o, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), c[r][u]));
        }
    }
}

#else

bool cpu_supports() { return false; }
bool beats_fp32_fma() { return false; }
void tile_scores(const amx::PackedQueries&, const amx::PackedKeys&, std::int64_t, std::int64_t, float*) {}
void add_weighted_values(const std::uint16_t*, std::int64_t, std::int64_t, const amx::PackedKeys&, std::int64_t, float*) {}

#endif

}  // namespace swa::dut::cpu::avx512_bf16
