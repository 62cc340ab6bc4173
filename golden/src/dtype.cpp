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
      for (; j + 8 <= count; j += 8) {
        const __m256 v = _mm256_loadu_ps(values + j);
        // A NaN lane keeps F16C's payload, not Eigen::half's: such groups go one value at a time.
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
          for (std::size_t i = j; i < j + 8; ++i) values[i] = static_cast<float>(Eigen::half(values[i]));
          continue;
        }
        _mm256_storeu_ps(values + j, _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
      }
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

void ulp_distances(DType dtype, const float* a, const float* b, std::size_t count, std::int64_t* distances) {
  std::size_t j = 0;
  if (dtype == DType::fp32) {
    for (; j < count; ++j)
      distances[j] = std::llabs(ordered(std::bit_cast<std::uint32_t>(a[j]), 32) - ordered(std::bit_cast<std::uint32_t>(b[j]), 32));
    return;
  }
#if defined(__F16C__)
  if (dtype == DType::fp16) {
    alignas(16) std::uint16_t ha[8], hb[8];
    for (; j + 8 <= count; j += 8) {
      const __m256 va = _mm256_loadu_ps(a + j), vb = _mm256_loadu_ps(b + j);
      // NaN lanes would keep F16C's payload, not Eigen::half's: such groups go one pair at a time.
      if (_mm256_movemask_ps(_mm256_cmp_ps(va, vb, _CMP_UNORD_Q)) != 0) {
        for (std::size_t i = j; i < j + 8; ++i) distances[i] = ulp_distance(dtype, a[i], b[i]);
        continue;
      }
      _mm_store_si128(reinterpret_cast<__m128i*>(ha), _mm256_cvtps_ph(va, _MM_FROUND_TO_NEAREST_INT));
      _mm_store_si128(reinterpret_cast<__m128i*>(hb), _mm256_cvtps_ph(vb, _MM_FROUND_TO_NEAREST_INT));
      for (int i = 0; i < 8; ++i) distances[j + i] = std::llabs(ordered(ha[i], 16) - ordered(hb[i], 16));
    }
  }
#endif
  if (dtype == DType::bf16) {
    // Eigen::bfloat16's rounding of a non-NaN float (to nearest even), eight pairs at a time with no
    // branch inside so the compiler vectorises it; a group holding a NaN goes one pair at a time.
    const auto bf16_bits = [](float x) {
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
      return (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    };
    for (; j + 8 <= count; j += 8) {
      bool any_nan = false;
      for (std::size_t i = j; i < j + 8; ++i) any_nan |= (a[i] != a[i]) | (b[i] != b[i]);
      if (any_nan) {
        for (std::size_t i = j; i < j + 8; ++i) distances[i] = ulp_distance(dtype, a[i], b[i]);
        continue;
      }
      for (std::size_t i = j; i < j + 8; ++i)
        distances[i] = std::llabs(ordered(bf16_bits(a[i]), 16) - ordered(bf16_bits(b[i]), 16));
    }
  }
  for (; j < count; ++j) distances[j] = ulp_distance(dtype, a[j], b[j]);
}

}  // namespace swa
