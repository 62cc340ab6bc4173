#include "swa/kv_format.hpp"

#include <bit>
#include <cmath>
#include <cstdint>

#include "swa/enum_names.hpp"

namespace swa {
namespace {

struct Fp8Layout {
  int mantissa_bits;
  int bias;
  int min_exponent;  // of the smallest normal: 1 - bias
  double max;
};

Fp8Layout layout(KvFormat f) {
  return f == KvFormat::fp8_e4m3 ? Fp8Layout{3, 7, -6, 448.0} : Fp8Layout{2, 15, -14, 57344.0};
}

// 2^k as a double, for -1022 <= k <= 1023: multiplying by it is ldexp wherever the result is a
// normal number or overflows, as every use below (ldexp goes through libm: a tenth of a warm run).
double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }

// std::ilogb of a positive finite double, from its exponent field where the value is normal.
int exponent_of(double a) {
  const int field = static_cast<int>((std::bit_cast<std::uint64_t>(a) >> 52) & 0x7ff);
  return field != 0 ? field - 1023 : std::ilogb(a);
}

}  // namespace

std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::dtype: return "dtype";
    case KvFormat::fp8_e4m3: return "fp8-e4m3";
    case KvFormat::fp8_e5m2: return "fp8-e5m2";
  }
  return "?";
}

std::optional<KvFormat> parse_kv_format(std::string_view name) { return parse_enum(name, kAllKvFormats, kv_format_name); }

std::size_t kv_element_bytes(KvFormat f, DType dtype) { return is_fp8(f) ? 1 : dtype_bytes(dtype); }

double fp8_max(KvFormat f) { return layout(f).max; }

std::uint8_t fp8_encode(KvFormat f, double x) {
  const Fp8Layout l = layout(f);
  if (std::isnan(x)) return 0x7f;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  double a = std::fabs(x);
  if (a == 0.0) return sign;
  if (std::isinf(a)) return static_cast<std::uint8_t>(sign | fp8_encode(f, l.max));
  // The spacing of representable values around a (constant below the smallest normal), then round
  // half to even: nearbyint in the default rounding mode. Scaling by powers of two is exact.
  int e = exponent_of(a);
  if (e < l.min_exponent) e = l.min_exponent;
  a = std::nearbyint(a * pow2(l.mantissa_bits - e)) * pow2(e - l.mantissa_bits);
  if (a > l.max) a = l.max;
  if (a == 0.0) return sign;
  // a is now representable: find its fields.
  const int exponent = exponent_of(a);
  if (exponent < l.min_exponent)
    return static_cast<std::uint8_t>(sign | static_cast<int>(a * pow2(l.mantissa_bits - l.min_exponent)));
  const int mantissa = static_cast<int>(a * pow2(l.mantissa_bits - exponent)) - (1 << l.mantissa_bits);
  return static_cast<std::uint8_t>(sign | ((exponent + l.bias) << l.mantissa_bits) | mantissa);
}

double fp8_decode(KvFormat f, std::uint8_t code) {
  const Fp8Layout l = layout(f);
  const int exponent_field = (code & 0x7f) >> l.mantissa_bits;
  const int mantissa = code & ((1 << l.mantissa_bits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int top = (1 << (7 - l.mantissa_bits)) - 1;
  if (f == KvFormat::fp8_e4m3 && exponent_field == top && mantissa == (1 << l.mantissa_bits) - 1)
    return std::nan("");
  if (f == KvFormat::fp8_e5m2 && exponent_field == top)
    return mantissa == 0 ? sign * INFINITY : std::nan("");
  if (exponent_field == 0) return sign * (mantissa * pow2(l.min_exponent - l.mantissa_bits));
  return sign * (((1 << l.mantissa_bits) + mantissa) * pow2(exponent_field - l.bias - l.mantissa_bits));
}

double kv_read_value(KvFormat f, double descale, double x) {
  return is_fp8(f) ? fp8_decode(f, fp8_encode(f, x / descale)) * descale : x;
}

}  // namespace swa
