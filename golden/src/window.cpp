#include "swa/window.hpp"

#include <stdexcept>
#include "swa/enum_names.hpp"

namespace swa {

std::optional<std::int64_t> band_keys_including_self(WindowBand band) {
  if (band.left < 0) return std::nullopt;
  return band.left + 1;
}

std::int64_t band_pair_count(WindowBand band, std::int64_t n) {
  std::int64_t pairs = 0;
  for (std::int64_t i = 0; i < n; ++i) pairs += band_end_key(band, i, n) - band_first_key(band, i);
  return pairs;
}

SWA_ENUM_NAMES(WindowConvention, convention_name, parse_convention, kAllWindowConventions,
               {WindowConvention::keys_including_self, "keys_including_self"},
               {WindowConvention::flex_lookback, "flex_lookback"},
               {WindowConvention::atb_prose, "atb_prose"})

WindowBand band_from_window(std::int64_t window, WindowConvention convention) {
  if (window < 1) throw std::invalid_argument("window must be >= 1, got " + std::to_string(window));
  switch (convention) {
    case WindowConvention::keys_including_self: return {window - 1, 0};
    case WindowConvention::flex_lookback:
    case WindowConvention::atb_prose: return {window, 0};
  }
  throw std::invalid_argument("unknown window convention");
}

std::optional<std::int64_t> window_from_band(WindowBand band, WindowConvention convention) {
  if (band.right != 0 || band.left < 0) return std::nullopt;
  switch (convention) {
    case WindowConvention::keys_including_self: return band.left + 1;
    case WindowConvention::flex_lookback:
    case WindowConvention::atb_prose:
      if (band.left < 1) return std::nullopt;
      return band.left;
  }
  return std::nullopt;
}

WindowBand normalize_band(WindowBand band, std::int64_t max_key_len) {
  if (band.left >= max_key_len) band.left = -1;
  if (band.right >= max_key_len) band.right = -1;
  return band;
}

std::string describe_band(WindowBand band) {
  if (band == causal_band()) return "causal";
  return "band(left=" + std::to_string(band.left) + ",right=" + std::to_string(band.right) + ")";
}

}  // namespace swa
