#include "swa/kv_format.hpp"

#include <cmath>

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
  // The spacing of representable values around a (constant below the smallest normal), then round
  // half to even: nearbyint in the default rounding mode. Scaling by powers of two is exact.
  int e = std::isinf(a) ? 1 << 20 : std::ilogb(a);
  if (e < l.min_exponent) e = l.min_exponent;
  if (!std::isinf(a)) a = std::nearbyint(std::ldexp(a, l.mantissa_bits - e)) * std::ldexp(1.0, e - l.mantissa_bits);
  if (a > l.max) a = l.max;
  if (a == 0.0) return sign;
  // a is now representable: find its fields.
  const int exponent = std::ilogb(a);
  if (exponent < l.min_exponent)
    return static_cast<std::uint8_t>(sign | static_cast<int>(std::ldexp(a, l.mantissa_bits - l.min_exponent)));
  const int mantissa = static_cast<int>(std::ldexp(a, l.mantissa_bits - exponent)) - (1 << l.mantissa_bits);
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
  if (exponent_field == 0) return sign * std::ldexp(mantissa, l.min_exponent - l.mantissa_bits);
  return sign * std::ldexp((1 << l.mantissa_bits) + mantissa, exponent_field - l.bias - l.mantissa_bits);
}

double kv_read_value(KvFormat f, double descale, double x) {
  return is_fp8(f) ? fp8_decode(f, fp8_encode(f, x / descale)) * descale : x;
}

}  // namespace swa
