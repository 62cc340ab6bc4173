#define BOOST_TEST_MODULE dut_visibility
// The host/device visibility shared by the CPU and CUDA kernels, against the golden's definitions.
#include <boost/test/unit_test.hpp>

#include "swa/atb_masks.hpp"
#include "swa/dut/visibility.hpp"
#include "swa/mask_decoder.hpp"

using namespace swa;
using namespace swa::dut;

namespace {

AttnParams compressed_params(const Mask& m, std::int64_t window) {
  AttnParams p;
  p.band = band_from_window(window, WindowConvention::keys_including_self);
  p.mask_format = MaskFormat::swa_compress;
  p.mask = m.values.data();
  p.mask_rows = m.rows;
  p.mask_block = static_cast<int>(m.block);
  p.mask_effective_window = m.effective_window;
  return p;
}

}  // namespace

// Per element and whatever tile a kernel reads it in, the compressed mask decodes exactly as the
// golden's tile walk over a sequence of n tokens, including a mask that disagrees with the window.
BOOST_AUTO_TEST_CASE(compressed_mask_elements_match_the_golden_tile_walk) {
  for (AtbSample generator : {AtbSample::python, AtbSample::cpp})
    for (std::int64_t window : {129, 300, 512})
      for (std::int64_t n : {1, 200, 700}) {
        MaskSpec spec;
        spec.type = MaskType::swa_compress;
        spec.window = window;
        spec.head_size = 128;
        spec.generator = generator;
        const Mask m = generate_mask(spec);
        const AttnParams p = compressed_params(m, window);
        const Visibility vis(p);
        const DecodedMask golden =
            decode_compressed_mask(m, TileWalkRule{window, CompressGeometry{m.block, m.effective_window}}, n);
        std::int64_t differ = 0;
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t c = 0; c < n; ++c) differ += vis.visible_in_sequence(r, c, n) != golden.at(r, c);
        BOOST_TEST(differ == 0, "generator " << static_cast<int>(generator) << " W=" << window << " n=" << n);
      }
}

BOOST_AUTO_TEST_CASE(a_mask_read_with_the_wrong_effective_window_differs_from_the_golden_window) {
  MaskSpec spec;
  spec.type = MaskType::swa_compress;
  spec.window = 512;
  spec.head_size = 128;
  const Mask m = generate_mask(spec);
  AttnParams p = compressed_params(m, 512);
  p.mask_effective_window = compress_geometry(AtbSample::cpp, 128, 512).effective_window;
  const Visibility vis(p);
  const WindowBand band = band_from_window(512, WindowConvention::keys_including_self);
  std::int64_t differ = 0;
  for (std::int64_t r = 0; r < 1200; ++r)
    for (std::int64_t c = 0; c < 1200; ++c) differ += vis.visible_in_sequence(r, c, 1200) != band_visible(band, r, c);
  BOOST_TEST(differ > 0);
}

BOOST_AUTO_TEST_CASE(tile_classes_agree_with_every_element) {
  const AttnParams p = [] {
    AttnParams q;
    q.band = band_from_window(37, WindowConvention::keys_including_self);
    return q;
  }();
  const Visibility vis(p);
  for (std::int64_t r0 = 0; r0 < 200; r0 += 23)
    for (std::int64_t c0 = 0; c0 < 200; c0 += 19) {
      const std::int64_t r1 = r0 + 23, c1 = c0 + 19;
      std::int64_t seen = 0;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) seen += vis.visible(r, c);
      const TileClass cls = vis.classify(r0, r1, c0, c1);
      if (cls == TileClass::hidden) BOOST_TEST(seen == 0);
      if (cls == TileClass::full) BOOST_TEST(seen == (r1 - r0) * (c1 - c0));
    }
}

BOOST_AUTO_TEST_CASE(key_range_is_the_band_clipped_to_the_keys_held) {
  const WindowBand band = band_from_window(10, WindowConvention::keys_including_self);
  const KeyRange r = band_key_range(band, 20, 30, 0, 100);
  BOOST_TEST(r.first == 11);
  BOOST_TEST(r.end == 30);
  const KeyRange clipped = band_key_range(band, 20, 30, 15, 25);
  BOOST_TEST(clipped.first == 15);
  BOOST_TEST(clipped.end == 25);
  const KeyRange causal = band_key_range(causal_band(), 5, 6, 0, 100);
  BOOST_TEST(causal.first == 0);
  BOOST_TEST(causal.end == 6);
}
