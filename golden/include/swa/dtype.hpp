#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace swa {

// Storage dtype of Q, K, V and the output. Accumulation is always wider (fp32 in the baseline and
// the DUTs, fp64 in the golden).
enum class DType : std::uint8_t { fp32, fp16, bf16 };

inline constexpr DType kAllDTypes[] = {DType::fp32, DType::fp16, DType::bf16};

std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);
std::string dtype_choices();  // "fp32|fp16|bf16", for error messages

constexpr std::size_t dtype_bytes(DType dtype) { return dtype == DType::fp32 ? 4 : 2; }

// Round-to-nearest-even from float to the dtype, returned as the (exactly representable) float.
// fp16 overflows to ±inf at |x| >= 65520; NaN stays NaN.
float round_to(DType dtype, float value);
// round_to over values[0, count) in place, the dtype dispatched once (fp32: nothing to do).
void round_all_to(DType dtype, float* values, std::size_t count);

// Raw storage conversion: `dst` points to dtype_bytes(dtype) bytes.
void store_as(DType dtype, float value, void* dst);
float load_from(DType dtype, const void* src);
// store_as and load_from over count consecutive elements, the dtype dispatched once and several
// elements per instruction where the build allows: the same bits as the one-element versions.
void store_all_as(DType dtype, const float* values, std::size_t count, void* dst);
void load_all_from(DType dtype, const void* src, std::size_t count, float* values);
// load_all_from a block at a time into a buffer on the stack, each block handed to
// use(const float* values, std::size_t n): storage read as floats with no whole float copy made.
template <class Use>
void for_each_loaded_block(DType dtype, const void* src, std::size_t count, Use&& use) {
  constexpr std::size_t kBlock = 512;
  alignas(64) float block[kBlock];
  const auto* in = static_cast<const unsigned char*>(src);
  for (std::size_t i0 = 0; i0 < count; i0 += kBlock) {
    const std::size_t n = count - i0 < kBlock ? count - i0 : kBlock;
    load_all_from(dtype, in + i0 * dtype_bytes(dtype), n, block);
    use(static_cast<const float*>(block), n);
  }
}
// load_all_from into a new vector, a block at a time (no zero-filled vector first).
std::vector<float> load_all(DType dtype, const void* src, std::size_t count);

// Unit roundoff u = 2^-p (fp32 2^-24, fp16 2^-11, bf16 2^-8).
double unit_roundoff(DType dtype);

// Distance in units in the last place between two finite floats once each is rounded to the dtype
// (as round_to rounds it; a value beyond fp16's range becomes inf); monotone integer ordering of the
// bit patterns, so +0 and -0 are 0 apart.
std::int64_t ulp_distance(DType dtype, float a, float b);

// ulp_distance of each pair (a[i], b[i]), i < count, into distances[i]: the same values, several
// pairs per instruction where the build allows.
void ulp_distances(DType dtype, const float* a, const float* b, std::size_t count, std::int64_t* distances);

}  // namespace swa
