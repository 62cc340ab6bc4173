#include "swa/dtype.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cstring>
#include <cstdlib>
#include "swa/enum_names.hpp"
#if defined(__F16C__) || defined(__AVX__)
#include <immintrin.h>
#endif

namespace swa {

SWA_ENUM_NAMES(DType, dtype_name, parse_dtype, kAllDTypes,
               {DType::fp32, "fp32"}, {DType::fp16, "fp16"}, {DType::bf16, "bf16"})

std::string dtype_choices() { return enum_choices(kAllDTypes, dtype_name); }

namespace {
// Eight lanes at a time in GCC vector types (AVX2 or AVX-512 registers, SSE pairs elsewhere).
using U16x8 = std::uint16_t __attribute__((vector_size(16)));
using U32x8 = std::uint32_t __attribute__((vector_size(32)));
using I32x8 = std::int32_t __attribute__((vector_size(32)));
using I64x8 = std::int64_t __attribute__((vector_size(64)));
using F32x8 = float __attribute__((vector_size(32)));

// Eigen::bfloat16's rounding of non-NaN floats' bit patterns: to nearest, ties to even. U is
// std::uint32_t or a vector of them (the same formula lane by lane).
template <class U>
U bf16_round_bits(U bits) {
  return (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
}
inline std::uint16_t bf16_bits_of(float x) {
  return static_cast<std::uint16_t>(bf16_round_bits(std::bit_cast<std::uint32_t>(x)));
}

// Whether any of a[0..8) and b[0..8) is a NaN.
bool any_nan8(const float* a, const float* b) {
#if defined(__AVX__)
  // One unordered compare and a sign mask (OR-ing the lanes one by one was a third of ulp_distances).
  const __m256 va = _mm256_loadu_ps(a), vb = _mm256_loadu_ps(b);
  return _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(va, va, _CMP_UNORD_Q), _mm256_cmp_ps(vb, vb, _CMP_UNORD_Q))) != 0;
#else
  F32x8 va, vb;
  std::memcpy(&va, a, sizeof va);
  std::memcpy(&vb, b, sizeof vb);
  const I32x8 nan = (va != va) | (vb != vb);
  std::int32_t any = 0;
  for (int i = 0; i < 8; ++i) any |= nan[i];
  return any != 0;
#endif
}
}  // namespace

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
    case DType::bf16: {
      // Sixteen at a time on the bits, lane by lane (AVX-512, AVX2 or SSE: the same bits).
      using Bits16 = std::uint32_t __attribute__((vector_size(64)));
      std::size_t j = 0;
      for (; j + 16 <= count; j += 16) {
        Bits16 bits;
        std::memcpy(&bits, values + j, sizeof bits);
        // A NaN lane takes Eigen::bfloat16's canonical NaN: such groups go one value at a time.
        if (any_nan8(values + j, values + j + 8)) {
          for (std::size_t i = j; i < j + 16; ++i) values[i] = static_cast<float>(Eigen::bfloat16(values[i]));
          continue;
        }
        bits = bf16_round_bits(bits) << 16;
        std::memcpy(values + j, &bits, sizeof bits);
      }
      for (; j < count; ++j) values[j] = static_cast<float>(Eigen::bfloat16(values[j]));
      return;
    }
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

void store_all_as(DType dtype, const float* values, std::size_t count, void* dst) {
  if (dtype == DType::fp32) {
    std::memcpy(dst, values, count * 4);
    return;
  }
  auto* out = static_cast<unsigned char*>(dst);
  std::size_t j = 0;
  if (dtype == DType::fp16) {
#if defined(__F16C__)
    for (; j + 8 <= count; j += 8) {
      const __m256 v = _mm256_loadu_ps(values + j);
      // A NaN lane keeps F16C's payload, not Eigen::half's: such groups go one value at a time.
      if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
        for (std::size_t i = j; i < j + 8; ++i) store_as(dtype, values[i], out + 2 * i);
        continue;
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * j), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
#endif
  } else {
    alignas(16) std::uint16_t bits[8];
    for (; j + 8 <= count; j += 8) {
      bool any_nan = false;
      for (std::size_t i = 0; i < 8; ++i) any_nan |= values[j + i] != values[j + i];
      if (any_nan) {
        for (std::size_t i = j; i < j + 8; ++i) store_as(dtype, values[i], out + 2 * i);
        continue;
      }
      for (std::size_t i = 0; i < 8; ++i) bits[i] = bf16_bits_of(values[j + i]);
      std::memcpy(out + 2 * j, bits, sizeof bits);
    }
  }
  for (; j < count; ++j) store_as(dtype, values[j], out + 2 * j);
}

void load_all_from(DType dtype, const void* src, std::size_t count, float* values) {
  if (dtype == DType::fp32) {
    std::memcpy(values, src, count * 4);
    return;
  }
  const auto* in = static_cast<const unsigned char*>(src);
  std::size_t j = 0;
  if (dtype == DType::bf16) {
    // A bfloat16 is the top half of a float: the conversion is exact for every pattern, NaN included.
    alignas(16) std::uint16_t bits[8];
    for (; j + 8 <= count; j += 8) {
      std::memcpy(bits, in + 2 * j, sizeof bits);
      for (std::size_t i = 0; i < 8; ++i) values[j + i] = std::bit_cast<float>(std::uint32_t{bits[i]} << 16);
    }
  } else {
#if defined(__F16C__)
    for (; j + 8 <= count; j += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * j));
      // A NaN pattern (exponent all ones, mantissa not zero) goes through Eigen::half: its payload.
      const __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
      if (_mm_movemask_epi8(_mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7c00))) != 0) {
        for (std::size_t i = j; i < j + 8; ++i) values[i] = load_from(dtype, in + 2 * i);
        continue;
      }
      _mm256_storeu_ps(values + j, _mm256_cvtph_ps(h));
    }
#endif
  }
  for (; j < count; ++j) values[j] = load_from(dtype, in + 2 * j);
}

std::vector<float> load_all(DType dtype, const void* src, std::size_t count) {
  std::vector<float> values;
  values.reserve(count);
  for_each_loaded_block(dtype, src, count,
                        [&](const float* block, std::size_t n) { values.insert(values.end(), block, block + n); });
  return values;
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

namespace {
// ordered() of eight bit patterns of `width` bits.
I32x8 ordered8(U32x8 bits, std::uint32_t width) {
  const std::uint32_t sign_bit = 1u << (width - 1);
  const U32x8 sign = U32x8{} + sign_bit;
  const I32x8 magnitude = reinterpret_cast<I32x8>(bits & (sign - 1u));
  return (bits & sign) != 0 ? -magnitude : magnitude;
}

void put_distances(I32x8 a, I32x8 b, std::int64_t* out) {
  I64x8 d = __builtin_convertvector(a, I64x8) - __builtin_convertvector(b, I64x8);
  d = d < 0 ? -d : d;
  std::memcpy(out, &d, sizeof d);
}

U32x8 load_bits(const float* x) {
  U32x8 bits;
  std::memcpy(&bits, x, sizeof bits);
  return bits;
}

}  // namespace

void ulp_distances(DType dtype, const float* a, const float* b, std::size_t count, std::int64_t* distances) {
  std::size_t j = 0;
  if (dtype == DType::fp32) {
    // No rounding: the bit patterns themselves, NaN included.
    for (; j + 8 <= count; j += 8) put_distances(ordered8(load_bits(a + j), 32), ordered8(load_bits(b + j), 32), distances + j);
    for (; j < count; ++j) distances[j] = ulp_distance(dtype, a[j], b[j]);
    return;
  }
  // A group holding a NaN goes one pair at a time: the rounding here is that of a non-NaN value.
  const auto one_at_a_time = [&](std::size_t from) {
    for (std::size_t i = from; i < from + 8; ++i) distances[i] = ulp_distance(dtype, a[i], b[i]);
  };
#if defined(__F16C__)
  if (dtype == DType::fp16) {
    for (; j + 8 <= count; j += 8) {
      if (any_nan8(a + j, b + j)) {
        one_at_a_time(j);
        continue;
      }
      U16x8 ha, hb;
      const __m128i pa = _mm256_cvtps_ph(_mm256_loadu_ps(a + j), _MM_FROUND_TO_NEAREST_INT);
      const __m128i pb = _mm256_cvtps_ph(_mm256_loadu_ps(b + j), _MM_FROUND_TO_NEAREST_INT);
      std::memcpy(&ha, &pa, sizeof ha);
      std::memcpy(&hb, &pb, sizeof hb);
      put_distances(ordered8(__builtin_convertvector(ha, U32x8), 16), ordered8(__builtin_convertvector(hb, U32x8), 16),
                    distances + j);
    }
  }
#endif
  if (dtype == DType::bf16) {
    for (; j + 8 <= count; j += 8) {
      if (any_nan8(a + j, b + j)) {
        one_at_a_time(j);
        continue;
      }
      put_distances(ordered8(bf16_round_bits(load_bits(a + j)), 16), ordered8(bf16_round_bits(load_bits(b + j)), 16), distances + j);
    }
  }
  for (; j < count; ++j) distances[j] = ulp_distance(dtype, a[j], b[j]);
}

}  // namespace swa
