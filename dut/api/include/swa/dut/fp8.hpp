#pragma once
// The DUTs' FP8 codec (OCP e4m3 and e5m2), float in and out, shared by the CPU DUT, the CUDA
// kernels, the mutants and the host-side cache writer. Independent of the golden's (kv_format.cpp,
// which works on exact doubles); dut_cpu_test checks the two agree on every code and on every
// float rounding boundary.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "swa/host_device.hpp"
#include "swa/kv_format.hpp"

namespace swa::dut {

struct Fp8Bits {
  int mantissa_bits, bias, max_exponent, max_mantissa;  // the largest finite value's fields
};

SWA_HOST_DEVICE inline Fp8Bits fp8_bits(bool e4m3) { return e4m3 ? Fp8Bits{3, 7, 8, 6} : Fp8Bits{2, 15, 15, 3}; }

SWA_HOST_DEVICE inline std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

SWA_HOST_DEVICE inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// Round to nearest even. saturate: beyond the largest finite value (and +-inf) -> +-max, the OCP
// saturating conversion; otherwise e4m3 overflows to NaN and e5m2 to +-inf (non-saturating mode).
SWA_HOST_DEVICE inline std::uint8_t fp8_from_float(float x, bool e4m3, bool saturate = true) {
  const Fp8Bits f = fp8_bits(e4m3);
  const std::uint32_t u = float_bits(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;  // NaN
  const int min_exponent = 1 - f.bias;
  const int drop = 23 - f.mantissa_bits;
  if (static_cast<int>(a >> 23) - 127 < min_exponent) {
    // Below the smallest normal: a multiple of 2^(min_exponent - mantissa_bits); scaling is exact.
    const float steps = rintf(ldexpf(bits_float(a), f.mantissa_bits - min_exponent));  // 0 .. 2^m (-> smallest normal)
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(steps));
  }
  a += (1u << (drop - 1)) - 1u + ((a >> drop) & 1u);  // nearest even on the kept mantissa bits
  const int exponent = static_cast<int>(a >> 23) - 127;
  const int mantissa = static_cast<int>((a >> drop) & ((1u << f.mantissa_bits) - 1u));
  if (exponent > f.max_exponent || (exponent == f.max_exponent && mantissa > f.max_mantissa)) {
    if (saturate) return static_cast<std::uint8_t>(sign | ((f.max_exponent + f.bias) << f.mantissa_bits) | f.max_mantissa);
    return static_cast<std::uint8_t>(e4m3 ? (sign | 0x7f) : (sign | 0x7c));
  }
  return static_cast<std::uint8_t>(sign | ((exponent + f.bias) << f.mantissa_bits) | mantissa);
}

SWA_HOST_DEVICE inline float fp8_to_float(std::uint8_t code, bool e4m3) {
  const Fp8Bits f = fp8_bits(e4m3);
  const int exponent_field = (code & 0x7f) >> f.mantissa_bits;
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  const float sign = (code & 0x80) ? -1.f : 1.f;
  const int top = (1 << (7 - f.mantissa_bits)) - 1;
  if (exponent_field == top && (e4m3 ? mantissa == 7 : true)) return e4m3 || mantissa ? NAN : sign * INFINITY;
  if (exponent_field == 0) return sign * ldexpf(static_cast<float>(mantissa), 1 - f.bias - f.mantissa_bits);
  return sign * ldexpf(static_cast<float>((1 << f.mantissa_bits) + mantissa), exponent_field - f.bias - f.mantissa_bits);
}

// What a kernel reads back for the input value x: its FP8 code times the descale.
SWA_HOST_DEVICE inline float fp8_round_trip(float x, bool e4m3, float descale) {
  return fp8_to_float(fp8_from_float(x / descale, e4m3), e4m3) * descale;
}

SWA_HOST_DEVICE inline bool is_e4m3(KvFormat f) { return f == KvFormat::fp8_e4m3; }

}  // namespace swa::dut
