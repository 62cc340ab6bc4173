#define BOOST_TEST_MODULE golden_window
#include <boost/test/unit_test.hpp>
#include <stdexcept>

#include "swa/window.hpp"

using namespace swa;

namespace {
std::int64_t keys_seen(WindowBand band, std::int64_t q, std::int64_t n) {
  std::int64_t count = 0;
  for (std::int64_t k = 0; k < n; ++k) count += band_visible(band, q, k);
  return count;
}
}  // namespace

BOOST_AUTO_TEST_CASE(canonical_window_sees_w_keys_including_self) {
  const WindowBand b = band_from_window(3, WindowConvention::keys_including_self);
  BOOST_TEST(b.left == 2);
  BOOST_TEST(b.right == 0);
  BOOST_TEST(band_visible(b, 10, 10));
  BOOST_TEST(band_visible(b, 10, 8));
  BOOST_TEST(!band_visible(b, 10, 7));   // i - W < j fails at j = i - W
  BOOST_TEST(!band_visible(b, 10, 11));  // causal
  BOOST_TEST(keys_seen(b, 10, 20) == 3);
  BOOST_TEST(keys_seen(b, 1, 20) == 2);  // near the start, fewer keys exist
}

BOOST_AUTO_TEST_CASE(lookback_conventions_see_w_plus_one_keys) {
  for (auto c : {WindowConvention::flex_lookback, WindowConvention::atb_prose}) {
    const WindowBand b = band_from_window(3, c);
    BOOST_TEST(keys_seen(b, 10, 20) == 4);
    BOOST_TEST(band_visible(b, 10, 7));   // m - n = 3 is not > 3: attended
    BOOST_TEST(!band_visible(b, 10, 6));  // m - n = 4 > 3: skipped
  }
}

BOOST_AUTO_TEST_CASE(flash_attn_window_size_maps_to_canonical) {
  for (std::int64_t w : {1, 2, 7, 4096})
    BOOST_TEST((band_from_flash_attn(w - 1, 0) == band_from_window(w, WindowConvention::keys_including_self)));
  BOOST_TEST((band_from_flash_attn(-1, 0) == causal_band()));
}

BOOST_AUTO_TEST_CASE(conversions_round_trip_and_disagree_by_one) {
  for (std::int64_t w : {1, 3, 128, 4096})
    for (WindowConvention c : kAllWindowConventions)
      BOOST_TEST(window_from_band(band_from_window(w, c), c).value() == w);
  // The same band named in two conventions: canonical W+1 is lookback W.
  const WindowBand b = band_from_window(5, WindowConvention::keys_including_self);
  BOOST_TEST(window_from_band(b, WindowConvention::flex_lookback).value() == 4);
  BOOST_TEST(!window_from_band(causal_band(), WindowConvention::keys_including_self).has_value());
  // Canonical W = 1 (self only) has no lookback equivalent.
  BOOST_TEST(!window_from_band(band_from_window(1, WindowConvention::keys_including_self),
                               WindowConvention::atb_prose).has_value());
  BOOST_CHECK_THROW(band_from_window(0, WindowConvention::keys_including_self), std::invalid_argument);
  for (WindowConvention c : kAllWindowConventions) BOOST_TEST((parse_convention(convention_name(c)) == c));
}

BOOST_AUTO_TEST_CASE(window_at_least_seq_len_is_causal) {
  const std::int64_t n = 17;
  for (std::int64_t w : {17, 18, 1000})
    BOOST_TEST(band_pair_count(band_from_window(w, WindowConvention::keys_including_self), n) ==
               band_pair_count(causal_band(), n));
  BOOST_TEST(band_pair_count(causal_band(), n) == n * (n + 1) / 2);
  BOOST_TEST((normalize_band({17, 0}, 17) == causal_band()));
  BOOST_TEST((normalize_band({16, 0}, 17) == WindowBand{16, 0}));
}

BOOST_AUTO_TEST_CASE(pair_count_matches_closed_form) {
  for (std::int64_t w : {1, 3, 64}) {
    const std::int64_t n = 200;
    BOOST_TEST(band_pair_count(band_from_window(w, WindowConvention::keys_including_self), n) ==
               w * n - w * (w - 1) / 2);
  }
  const double ratio = static_cast<double>(band_pair_count(causal_band(), 16384)) /
                       band_pair_count(band_from_window(4096, WindowConvention::keys_including_self), 16384);
  BOOST_TEST(ratio == 2.2857, boost::test_tools::tolerance(1e-3));
}
