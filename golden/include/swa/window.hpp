#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "swa/host_device.hpp"

namespace swa {

// The one mask predicate. A query at absolute position i sees key j iff
//   -right <= i - j <= left,
// with a negative bound meaning unbounded (as FlashAttention's window_size = -1).
// Causal attention is the band (unbounded, 0); every SWA convention maps onto a band.
struct WindowBand {
  std::int64_t left = -1;
  std::int64_t right = 0;

  friend constexpr bool operator==(const WindowBand&, const WindowBand&) = default;
};

SWA_HOST_DEVICE constexpr bool band_visible(WindowBand band, std::int64_t q_pos, std::int64_t k_pos) {
  const std::int64_t distance = q_pos - k_pos;
  return (band.right < 0 || distance >= -band.right) && (band.left < 0 || distance <= band.left);
}

// First and one-past-last key position visible to query q_pos among keys [0, num_keys).
SWA_HOST_DEVICE constexpr std::int64_t band_first_key(WindowBand band, std::int64_t q_pos) {
  return band.left < 0 || q_pos - band.left < 0 ? 0 : q_pos - band.left;
}
SWA_HOST_DEVICE constexpr std::int64_t band_end_key(WindowBand band, std::int64_t q_pos,
                                                    std::int64_t num_keys) {
  const std::int64_t end = band.right < 0 ? num_keys : q_pos + band.right + 1;
  return end < num_keys ? end : num_keys;
}

constexpr WindowBand causal_band() { return {-1, 0}; }

// Keys a causal band can hold at most, counting the query itself (W); nullopt when unbounded.
std::optional<std::int64_t> band_keys_including_self(WindowBand band);

// Number of (query, key) pairs a causal-or-windowed band attends in a sequence of n tokens.
std::int64_t band_pair_count(WindowBand band, std::int64_t n);

// How a single integer "window" is read by the systems users port from.
enum class WindowConvention {
  // i - W < j <= i: W keys including the query. ATB's sample mask code, Mistral, xFormers, vLLM,
  // llama.cpp, cuDNN. The canonical meaning in this project.
  keys_including_self,
  // q - kv <= W: W + 1 keys. FlexAttention-style sliding-window mask_mod.
  flex_lookback,
  // "skip when m - n > windowLen": W + 1 keys. The prose of the ATB SelfAttention doc; its own
  // sample code disagrees (keys_including_self).
  atb_prose,
};

inline constexpr WindowConvention kAllWindowConventions[] = {
    WindowConvention::keys_including_self, WindowConvention::flex_lookback,
    WindowConvention::atb_prose};

std::string_view convention_name(WindowConvention c);
std::optional<WindowConvention> parse_convention(std::string_view name);

// window >= 1. The band is causal on the right.
WindowBand band_from_window(std::int64_t window, WindowConvention convention);
// Inverse; nullopt when the band is not expressible in that convention.
std::optional<std::int64_t> window_from_band(WindowBand band, WindowConvention convention);

// FlashAttention's window_size = (left, right), -1 = unbounded: taken as is.
constexpr WindowBand band_from_flash_attn(std::int64_t left, std::int64_t right) { return {left, right}; }
// FlashAttention's host normalisation: a left bound that covers every key is unbounded.
WindowBand normalize_band(WindowBand band, std::int64_t max_key_len);

std::string describe_band(WindowBand band);  // "band(left=3,right=0)" or "causal"

}  // namespace swa
