#include "amx_bf16.hpp"

#include "avx512_bf16.hpp"
#include "isa_setting.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SWA_AMX_BUILD 1
#endif

namespace swa::dut::cpu::amx {

namespace {

// Exact for a float that holds a bf16 value (every operand but P).
std::uint16_t bf16_bits_exact(float x) { return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16); }

// To nearest even; P is finite and non-negative, so no NaN case.
std::uint16_t bf16_bits_rounded(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

constexpr int kBlockKeys = 32;

int round_up(int n, int to) { return (n + to - 1) / to * to; }

#if defined(SWA_AMX_BUILD)

bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1u, amx_tile = (d >> 24) & 1u;
  if (!amx_bf16 || !amx_tile) return false;
  // The OS must save tile state: XCR0 bits 17 (TILECFG) and 18 (TILEDATA), read only when OSXSAVE is set.
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((lo >> 17) & 3u) == 3u;
}

// Linux hands out tile data state only on request, once per process.
bool request_tile_data() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// Palette 1, tiles 0-7 all 16 rows x 64 bytes: 0-3 accumulate, 4-5 hold A, 6-7 hold B.
struct alignas(64) TileConfig {
  std::uint8_t palette_id = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

const TileConfig& tile_config() {
  static const TileConfig config = [] {
    TileConfig c;
    for (int t = 0; t < 8; ++t) {
      c.colsb[t] = 64;
      c.rows[t] = 16;
    }
    return c;
  }();
  return config;
}

// Two 16-row blocks of A against two 16-column blocks of B, `steps` times, into tiles 0-3, stored to
// c (row stride c_stride floats): c = A x B, or c += A x B when `add_to_c`. a_step / b_step: elements
// between consecutive steps' operands.
__attribute__((target("amx-tile,amx-bf16"))) void block_2x2(const std::uint16_t* a, std::int64_t a_stride_bytes,
                                                              std::int64_t a_step, const std::uint16_t* b0,
                                                              const std::uint16_t* b1, std::int64_t b_stride_bytes,
                                                              std::int64_t b_step, int steps, float* c,
                                                              std::int64_t c_stride, bool add_to_c = false) {
  const std::uint16_t* a1 = a + 16 * a_stride_bytes / 2;
  const std::int64_t c_bytes = c_stride * 4;
  if (add_to_c) {
    _tile_loadd(0, c, c_bytes);
    _tile_loadd(1, c + 16, c_bytes);
    _tile_loadd(2, c + 16 * c_stride, c_bytes);
    _tile_loadd(3, c + 16 * c_stride + 16, c_bytes);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int s = 0; s < steps; ++s) {
    _tile_loadd(4, a + s * a_step, a_stride_bytes);
    _tile_loadd(5, a1 + s * a_step, a_stride_bytes);
    _tile_loadd(6, b0 + s * b_step, b_stride_bytes);
    _tile_loadd(7, b1 + s * b_step, b_stride_bytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, c_bytes);
  _tile_stored(1, c + 16, c_bytes);
  _tile_stored(2, c + 16 * c_stride, c_bytes);
  _tile_stored(3, c + 16 * c_stride + 16, c_bytes);
}

__attribute__((target("amx-tile"))) void load_tiles() { _tile_loadconfig(&tile_config()); }
__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

#endif

bool setting_keeps_fp32_gemms() {
  return isa_setting_is("portable") || isa_setting_is("no-bf16-products") || isa_setting_is("x86-64-v3");
}

Products choose_products() {
  if (setting_keeps_fp32_gemms()) return Products::none;
  const bool force_avx512_bf16 = isa_setting_is("avx512-bf16");
#if defined(SWA_AMX_BUILD)
  if (!isa_setting_is("no-amx") && !force_avx512_bf16 && cpu_has_amx_bf16() && request_tile_data()) return Products::amx;
#endif
  if (!avx512_bf16::cpu_supports()) return Products::none;
  return force_avx512_bf16 || avx512_bf16::beats_fp32_fma() ? Products::avx512_bf16 : Products::none;
}

}  // namespace

Products products() {
  static const Products chosen = choose_products();
  return chosen;
}

bool available() { return products() != Products::none; }

const char* products_name() {
  switch (products()) {
    case Products::amx: return "amx-bf16";
    case Products::avx512_bf16: return "avx512-bf16";
    case Products::none: break;
  }
  if (setting_keeps_fp32_gemms()) return "fp32 GEMM after conversion (SWA_CPU_ISA)";
  return avx512_bf16::cpu_supports() ? "fp32 GEMM after conversion (VDPBF16PS is no faster than FMA on this CPU)"
                                     : "fp32 GEMM after conversion";
}

namespace {
std::uint16_t bits_of(float x) { return bf16_bits_exact(x); }
std::uint16_t bits_of(std::uint16_t x) { return x; }
}  // namespace

void PackedKeys::pack(const float* keys, const float* values, std::int64_t stride, std::int64_t rows, int d) {
  pack_rows(keys, stride, values, stride, rows, d);
}

void PackedKeys::pack(const std::uint16_t* keys, std::int64_t k_stride, const std::uint16_t* values,
                      std::int64_t v_stride, std::int64_t rows, int d) {
  pack_rows(keys, k_stride, values, v_stride, rows, d);
}

template <class T>
void PackedKeys::pack_rows(const T* keys, std::int64_t k_stride, const T* values, std::int64_t v_stride,
                           std::int64_t rows, int d) {
  head_size = d;
  dims = round_up(d, 32);
  value_dims = round_up(d, 32);
  count = rows;
  const std::int64_t k_block = static_cast<std::int64_t>(dims / 2) * kBlockKeys * 2;
  const std::int64_t v_block = static_cast<std::int64_t>(kBlockKeys / 2) * value_dims * 2;
  k.assign(static_cast<std::size_t>(blocks() * k_block), 0);
  v.assign(static_cast<std::size_t>(blocks() * v_block), 0);
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t j = i / kBlockKeys, key = i % kBlockKeys;
    std::uint16_t* kd = k.data() + j * k_block + key * 2;
    std::uint16_t* vd = v.data() + j * v_block + (key / 2) * value_dims * 2 + (key & 1);
    const T* ks = keys + i * k_stride;
    const T* vs = values + i * v_stride;
    for (int e = 0; e < d; ++e) {
      kd[(e / 2) * kBlockKeys * 2 + (e & 1)] = bits_of(ks[e]);
      vd[e * 2] = bits_of(vs[e]);
    }
  }
}

void PackedQueries::pack(const float* queries, std::int64_t n, int d, int padded_dims) {
  rows = n;
  padded_rows = (n + 31) / 32 * 32;
  dims = padded_dims;
  q.assign(static_cast<std::size_t>(padded_rows * dims), 0);
  for (std::int64_t r = 0; r < n; ++r)
    for (int e = 0; e < d; ++e) q[r * dims + e] = bf16_bits_exact(queries[r * d + e]);
}

void tile_scores(const PackedQueries& q, const PackedKeys& keys, std::int64_t first_block, std::int64_t block_count,
                 float* scores) {
  if (products() == Products::avx512_bf16) return avx512_bf16::tile_scores(q, keys, first_block, block_count, scores);
#if defined(SWA_AMX_BUILD)
  const std::int64_t cols = block_count * kBlockKeys;
  const std::int64_t k_block = static_cast<std::int64_t>(keys.dims / 2) * kBlockKeys * 2;
  load_tiles();
  for (std::int64_t r0 = 0; r0 < q.padded_rows; r0 += 32)
    for (std::int64_t j = 0; j < block_count; ++j) {
      const std::uint16_t* kb = keys.k.data() + (first_block + j) * k_block;
      // Step c: dims [32c, 32c + 32) of A, dim pairs [16c, 16c + 16) of B (rows of 32 keys x 2).
      block_2x2(q.q.data() + r0 * q.dims, q.dims * 2, 32, kb, kb + 32, kBlockKeys * 2 * 2, 16 * kBlockKeys * 2,
                q.dims / 32, scores + r0 * cols + j * kBlockKeys, cols);
    }
  release_tiles();
#else
  (void)q, (void)keys, (void)first_block, (void)block_count, (void)scores;
  std::abort();  // available() is false in such a build, so no caller gets here
#endif
}

void round_weights_to_bf16(float* weights, std::int64_t count) {
  for (std::int64_t j = 0; j < count; ++j)
    weights[j] = std::bit_cast<float>(static_cast<std::uint32_t>(bf16_bits_rounded(weights[j])) << 16);
}

std::uint16_t* weights_buffer(ValueScratch& scratch, std::int64_t rows, std::int64_t cols) {
  const std::int64_t padded_rows = (rows + 31) / 32 * 32;
  scratch.p.resize(static_cast<std::size_t>(padded_rows * cols));
  std::fill(scratch.p.begin() + rows * cols, scratch.p.end(), std::uint16_t{0});
  return scratch.p.data();
}

void add_weighted_values(const float* weights, std::int64_t rows, const PackedKeys& keys, std::int64_t first_block,
                         std::int64_t block_count, ValueScratch& scratch, float* out) {
  const std::int64_t cols = block_count * kBlockKeys;
  std::uint16_t* p = weights_buffer(scratch, rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) p[i] = bf16_bits_rounded(weights[i]);
  add_packed_weighted_values(rows, keys, first_block, block_count, scratch, out);
}

void add_packed_weighted_values(std::int64_t rows, const PackedKeys& keys, std::int64_t first_block,
                                std::int64_t block_count, ValueScratch& scratch, float* out) {
  const std::int64_t cols = block_count * kBlockKeys;
  const std::int64_t padded_rows = (rows + 31) / 32 * 32;
  const int vd = keys.value_dims;
  if (products() == Products::avx512_bf16)
    return avx512_bf16::add_weighted_values(scratch.p.data(), rows, cols, keys, first_block, out);
#if defined(SWA_AMX_BUILD)
  const std::int64_t v_block = static_cast<std::int64_t>(kBlockKeys / 2) * vd * 2;
  const std::uint16_t* vb = keys.v.data() + first_block * v_block;
  const int d = keys.head_size;
  // When out's rows and columns fill whole tiles, the products accumulate on out itself; otherwise
  // into a padded product, added after.
  const bool in_place = rows == padded_rows && d == vd;
  if (!in_place) scratch.product.resize(static_cast<std::size_t>(padded_rows * vd));
  float* const target = in_place ? out : scratch.product.data();
  load_tiles();
  for (std::int64_t r0 = 0; r0 < padded_rows; r0 += 32)
    for (int n0 = 0; n0 < vd; n0 += 32)
      // Step j: keys [32j, 32j + 32) of A, key block j of B (16 key pairs x value dims x 2).
      block_2x2(scratch.p.data() + r0 * cols, cols * 2, kBlockKeys, vb + n0 * 2, vb + (n0 + 16) * 2, vd * 2 * 2,
                v_block, static_cast<int>(block_count), target + r0 * vd + n0, vd, in_place);
  release_tiles();
  if (in_place) return;
  for (std::int64_t r = 0; r < rows; ++r)
    for (int e = 0; e < d; ++e) out[r * d + e] += scratch.product[r * vd + e];
#else
  (void)vd, (void)padded_rows, (void)out;
  std::abort();
#endif
}

}  // namespace swa::dut::cpu::amx
