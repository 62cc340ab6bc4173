#pragma once
// bf16 tile products (pairs of bf16 products summed into fp32), for the prefill and chunked-prefill
// tiles of bf16 storage: on Intel AMX (TDPBF16PS) where the CPU has AMX-TILE and AMX-BF16 and Linux
// lets this process use tile data (arch_prctl), else on AVX512-BF16 (VDPBF16PS, avx512_bf16.hpp) where
// that instruction outruns the fp32 FMA (AMD Zen 4 and later; avx512_bf16::beats_fp32_fma), chosen at
// run time; `available()` is false otherwise, and the caller keeps the fp32 Eigen GEMMs.
// SWA_CPU_ISA=no-amx skips AMX; SWA_CPU_ISA=avx512-bf16 takes AVX512-BF16 wherever the CPU has it
// (how the tests cover that kernel on any such CPU); SWA_CPU_ISA=no-bf16-products or portable keeps
// the fp32 GEMMs.
//
// Numerics: the operands are the bf16 inputs themselves (exact), products are exact in fp32 and summed
// in fp32; the softmax weights P are rounded to bf16 (to nearest even) before P x V, as
// FlashAttention's bf16 kernels do. Row sums stay those of the fp32 weights. Both instructions treat
// subnormal inputs as zero and flush subnormal sums.
#include <cstdint>
#include <vector>

namespace swa::dut::cpu::amx {

enum class Products { none, amx, avx512_bf16 };
Products products();  // chosen once per process
bool available();     // products() != none
const char* products_name();  // "amx-bf16", "avx512-bf16" or "fp32 GEMM after conversion (...)": for /meta

// Keys and values of one key block as the tile instructions read them, in blocks of 32 keys from
// the block's first position: K as [dims / 2][32 keys][2] (a B operand of Q x K^T), V as
// [16 key pairs][value dims][2] (a B operand of P x V); dims and value dims padded with zeros to a
// multiple of 32, keys past the block's end are zero.
struct PackedKeys {
  int head_size = 0, dims = 0, value_dims = 0;
  std::int64_t count = 0;  // keys
  std::vector<std::uint16_t> k, v;

  // From fp32 rows holding bf16 values (`stride` floats apart).
  void pack(const float* keys, const float* values, std::int64_t stride, std::int64_t rows, int d);
  // From bf16 storage (rows `k_stride` / `v_stride` elements apart): no fp32 copy on the way.
  void pack(const std::uint16_t* keys, std::int64_t k_stride, const std::uint16_t* values, std::int64_t v_stride,
            std::int64_t rows, int d);
  std::int64_t blocks() const { return (count + 31) / 32; }

 private:
  template <class T>
  void pack_rows(const T* keys, std::int64_t k_stride, const T* values, std::int64_t v_stride, std::int64_t rows,
                 int d);
};

// The query rows of one task, packed once: [rows padded to 32][dims] bf16.
struct PackedQueries {
  std::int64_t rows = 0, padded_rows = 0;
  int dims = 0;
  std::vector<std::uint16_t> q;

  // From fp32 rows holding bf16 values, contiguous, `d` each.
  void pack(const float* queries, std::int64_t rows, int d, int padded_dims);
};

// scores (padded_rows x 32 * block_count, row-major) = Q x K^T over key blocks
// [first_block, first_block + block_count).
void tile_scores(const PackedQueries& q, const PackedKeys& keys, std::int64_t first_block, std::int64_t block_count,
                 float* scores);

// Softmax weights (finite, non-negative) rounded in place to bf16 values, as P x V takes them.
void round_weights_to_bf16(float* weights, std::int64_t count);

// out (rows x head_size, row-major) += P x V over the same key blocks, P given as fp32 weights
// (rows x 32 * block_count, row-major), rounded to bf16 here. `scratch` holds the packed P and the
// product.
struct ValueScratch {
  std::vector<std::uint16_t> p;
  std::vector<float> product;
};
void add_weighted_values(const float* weights, std::int64_t rows, const PackedKeys& keys, std::int64_t first_block,
                         std::int64_t block_count, ValueScratch& scratch, float* out);

// The same with P written by the caller as bf16 bits into weights_buffer(scratch, rows, cols): rows x
// cols, row-major, cols = 32 * block_count; the buffer's rows past `rows` (to a multiple of 32) are zero.
std::uint16_t* weights_buffer(ValueScratch& scratch, std::int64_t rows, std::int64_t cols);
void add_packed_weighted_values(std::int64_t rows, const PackedKeys& keys, std::int64_t first_block,
                                std::int64_t block_count, ValueScratch& scratch, float* out);

}  // namespace swa::dut::cpu::amx
