#pragma once
// How the KV cache stores K and V: in the run's dtype, or in OCP FP8 (e4m3, e5m2) with a per-tensor
// descale factor (vLLM's fp8 KV cache, FlashAttention-3's descale_k / descale_v). golden/README.md,
// "FP8 KV cache".
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "swa/dtype.hpp"
#include "swa/host_device.hpp"

namespace swa {

enum class KvFormat : std::uint8_t { dtype, fp8_e4m3, fp8_e5m2 };
inline constexpr KvFormat kAllKvFormats[] = {KvFormat::dtype, KvFormat::fp8_e4m3, KvFormat::fp8_e5m2};

std::string_view kv_format_name(KvFormat f);  // dtype | fp8-e4m3 | fp8-e5m2
std::optional<KvFormat> parse_kv_format(std::string_view name);

SWA_HOST_DEVICE inline bool is_fp8(KvFormat f) { return f != KvFormat::dtype; }
// Bytes per cached K or V element: 1 for FP8, the dtype's otherwise.
std::size_t kv_element_bytes(KvFormat f, DType dtype);
// The largest finite value: e4m3 448, e5m2 57344.
double fp8_max(KvFormat f);

// The golden's own FP8 codec (the DUTs have theirs). Encoding rounds the exact value x to nearest,
// ties to even, and saturates: |x| beyond the largest finite value (infinities too) becomes +-max,
// as the OCP FP8 spec's saturating conversion does. NaN becomes the format's NaN (0x7f).
std::uint8_t fp8_encode(KvFormat f, double x);
double fp8_decode(KvFormat f, std::uint8_t code);

// The value attention reads for an input K or V element x: x itself for KvFormat::dtype, else
// fp8_decode(fp8_encode(x / descale)) * descale: the product is exact in double (an FP8 value has
// at most 4 significant bits, a float descale 24); the quotient is rounded once, in double.
double kv_read_value(KvFormat f, double descale, double x);
// Each of values[0, count) replaced by its kv_read_value, rounded to float, in place: the fp32
// baseline's K and V, what a kernel gets multiplying the decoded code by the descale in fp32.
void kv_read_values(KvFormat f, double descale, float* values, std::size_t count);

}  // namespace swa
