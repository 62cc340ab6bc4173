#include "swa/kv_format.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "swa/enum_names.hpp"

namespace swa {
namespace {

struct Fp8Layout {
  int mantissa_bits;
  int bias;
  int min_exponent;  // of the smallest normal: 1 - bias
  double max;
  std::uint8_t max_code;
};

constexpr Fp8Layout layout(KvFormat f) {
  return f == KvFormat::fp8_e4m3 ? Fp8Layout{3, 7, -6, 448.0, 0x7e} : Fp8Layout{2, 15, -14, 57344.0, 0x7b};
}

// 2^k as a double, for -1022 <= k <= 1023: multiplying by it is ldexp wherever the result is a
// normal number or overflows, as every use below (ldexp goes through libm: a tenth of a warm run).
constexpr double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }

}  // namespace

SWA_ENUM_NAMES(KvFormat, kv_format_name, parse_kv_format, kAllKvFormats,
               {KvFormat::dtype, "dtype"}, {KvFormat::fp8_e4m3, "fp8-e4m3"},
               {KvFormat::fp8_e5m2, "fp8-e5m2"})

std::size_t kv_element_bytes(KvFormat f, DType dtype) { return is_fp8(f) ? 1 : dtype_bytes(dtype); }

double fp8_max(KvFormat f) { return layout(f).max; }

namespace {

// fp8_encode and fp8_decode, with internal linkage so that the loops below inline them.
std::uint8_t encode(KvFormat f, double x) {
  const Fp8Layout l = layout(f);
  if (std::isnan(x)) return 0x7f;
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const auto sign = static_cast<std::uint8_t>((bits >> 56) & 0x80);
  const std::uint64_t magnitude = bits & ~(std::uint64_t{1} << 63);
  const int exponent = static_cast<int>(magnitude >> 52) - 1023;  // -1023 for zero and subnormal doubles
  if (exponent > l.bias + 1) return static_cast<std::uint8_t>(sign | l.max_code);  // saturates, infinities too
  if (exponent < l.min_exponent) {
    // Below the smallest normal the spacing is constant, 2^(min_exponent - mantissa_bits): round the
    // count of steps half to even (nearbyint in the default rounding mode; the scaling is exact). A
    // count of 2^mantissa_bits is the smallest normal's code.
    const double steps = std::nearbyint(std::fabs(x) * pow2(l.mantissa_bits - l.min_exponent));
    return static_cast<std::uint8_t>(sign | static_cast<int>(steps));
  }
  // A normal: round the double's mantissa to mantissa_bits half to even, on its bits. A carry out of
  // the mantissa raises the exponent, as it should; the code is then monotone in the value, so
  // saturation is a minimum.
  const int drop = 52 - l.mantissa_bits;
  const std::uint64_t rounded =
      (magnitude + ((std::uint64_t{1} << (drop - 1)) - 1) + ((magnitude >> drop) & 1)) >> drop;
  const std::uint64_t code = rounded - (static_cast<std::uint64_t>(1023 - l.bias) << l.mantissa_bits);
  return static_cast<std::uint8_t>(sign | std::min<std::uint64_t>(code, l.max_code));
}

constexpr double decode_fields(KvFormat f, std::uint8_t code) {
  const Fp8Layout l = layout(f);
  const int exponent_field = (code & 0x7f) >> l.mantissa_bits;
  const int mantissa = code & ((1 << l.mantissa_bits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int top = (1 << (7 - l.mantissa_bits)) - 1;
  if (f == KvFormat::fp8_e4m3 && exponent_field == top && mantissa == (1 << l.mantissa_bits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  if (f == KvFormat::fp8_e5m2 && exponent_field == top)
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  if (exponent_field == 0) return sign * (mantissa * pow2(l.min_exponent - l.mantissa_bits));
  return sign * (((1 << l.mantissa_bits) + mantissa) * pow2(exponent_field - l.bias - l.mantissa_bits));
}

// Every code's value, decoded from its fields at compile time: a decode is one load.
struct DecodeTable {
  double value[2][256];
};
constexpr DecodeTable decode_table() {
  DecodeTable t{};
  for (int c = 0; c < 256; ++c) {
    t.value[0][c] = decode_fields(KvFormat::fp8_e4m3, static_cast<std::uint8_t>(c));
    t.value[1][c] = decode_fields(KvFormat::fp8_e5m2, static_cast<std::uint8_t>(c));
  }
  return t;
}
constexpr DecodeTable kDecode = decode_table();

double decode(KvFormat f, std::uint8_t code) { return kDecode.value[f == KvFormat::fp8_e5m2][code]; }

}  // namespace

std::uint8_t fp8_encode(KvFormat f, double x) { return encode(f, x); }
double fp8_decode(KvFormat f, std::uint8_t code) { return decode(f, code); }

double kv_read_value(KvFormat f, double descale, double x) {
  return is_fp8(f) ? decode(f, encode(f, x / descale)) * descale : x;
}

void kv_read_values(KvFormat f, double descale, float* values, std::size_t count) {
  if (!is_fp8(f)) return;
  for (std::size_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(decode(f, encode(f, values[i] / descale)) * descale);
}

}  // namespace swa
