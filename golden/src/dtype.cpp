#include "swa/dtype.hpp"

#include <Eigen/Core>
#include <bit>
#include <cstring>
#include <cstdlib>
#include "swa/enum_names.hpp"
#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace swa {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::fp32: return "fp32";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) { return parse_enum(name, kAllDTypes, dtype_name); }

std::string dtype_choices() { return enum_choices(kAllDTypes, dtype_name); }

std::size_t dtype_bytes(DType dtype) { return dtype == DType::fp32 ? 4 : 2; }

float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::fp32: return value;
    case DType::fp16: return static_cast<float>(Eigen::half(value));
    case DType::bf16: return static_cast<float>(Eigen::bfloat16(value));
  }
  return value;
}

void round_all_to(DType dtype, float* values, std::size_t count) {
  switch (dtype) {
    case DType::fp32: return;
    case DType::fp16: {
      std::size_t j = 0;
#if defined(__F16C__)
      // Eight at a time with the instruction Eigen::half uses for one in an F16C build (to nearest even).
      for (; j + 8 <= count; j += 8)
        _mm256_storeu_ps(values + j,
                         _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(values + j), _MM_FROUND_TO_NEAREST_INT)));
#endif
      for (; j < count; ++j) values[j] = static_cast<float>(Eigen::half(values[j]));
      return;
    }
    case DType::bf16:
      for (std::size_t j = 0; j < count; ++j) values[j] = static_cast<float>(Eigen::bfloat16(values[j]));
      return;
  }
}

void store_as(DType dtype, float value, void* dst) {
  switch (dtype) {
    case DType::fp32: std::memcpy(dst, &value, 4); return;
    case DType::fp16: {
      const std::uint16_t bits = Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(value));
      std::memcpy(dst, &bits, 2);
      return;
    }
    case DType::bf16: {
      const std::uint16_t bits = Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(value));
      std::memcpy(dst, &bits, 2);
      return;
    }
  }
}

float load_from(DType dtype, const void* src) {
  if (dtype == DType::fp32) {
    float v;
    std::memcpy(&v, src, 4);
    return v;
  }
  std::uint16_t bits;
  std::memcpy(&bits, src, 2);
  if (dtype == DType::fp16) return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::fp32: return 0x1p-24;
    case DType::fp16: return 0x1p-11;
    case DType::bf16: return 0x1p-8;
  }
  return 0;
}

namespace {
// Maps the sign-magnitude bit pattern onto a monotone integer line.
std::int64_t ordered(std::uint32_t bits, int width) {
  const std::uint32_t sign = 1u << (width - 1);
  const std::int64_t magnitude = bits & (sign - 1);
  return (bits & sign) ? -magnitude : magnitude;
}
}  // namespace

std::int64_t ulp_distance(DType dtype, float a, float b) {
  std::uint32_t ba = 0, bb = 0;
  int width = 16;
  if (dtype == DType::fp32) {
    ba = std::bit_cast<std::uint32_t>(a);
    bb = std::bit_cast<std::uint32_t>(b);
    width = 32;
  } else {
    std::uint16_t ha = 0, hb = 0;
    store_as(dtype, a, &ha);
    store_as(dtype, b, &hb);
    ba = ha;
    bb = hb;
  }
  return std::llabs(ordered(ba, width) - ordered(bb, width));
}

}  // namespace swa
