#define BOOST_TEST_MODULE golden_mask_decoder
#include <boost/test/unit_test.hpp>

#include "swa/mask_decoder.hpp"

using namespace swa;

namespace {
const int kHeadSizes[] = {64, 80, 96, 128, 160, 192, 256};
const std::int64_t kWindows[] = {1, 2, 3, 127, 128, 129, 383, 384, 385, 512, 4096};

Mask compressed(AtbSample gen, int d, std::int64_t w) {
  MaskSpec s;
  s.type = MaskType::swa_compress;
  s.window = w;
  s.head_size = d;
  s.dtype = DType::bf16;
  s.generator = gen;
  return generate_mask(s);
}
}  // namespace

BOOST_AUTO_TEST_CASE(matched_generator_and_block_rule_decode_to_the_window) {
  for (int d : kHeadSizes)
    for (std::int64_t w : kWindows)
      for (AtbSample s : kAllAtbSamples) {
        const MaskCheckCase c = check_compressed_mask(d, w, s, s);
        BOOST_TEST(c.error.empty());
        BOOST_TEST(!c.result.differs, "D=" << d << " W=" << w << " sample=" << sample_name(s) << ": " << c.result.detail);
      }
}

// Where the samples' formulas differ, pairing a mask from one with a kernel from the other breaks.
BOOST_AUTO_TEST_CASE(crossed_pairings_disagree_where_the_formulas_differ) {
  const MaskCheckCase c = check_compressed_mask(128, 512, AtbSample::python, AtbSample::cpp);
  BOOST_TEST(c.generated.effective_window == 384);
  BOOST_TEST(c.assumed.effective_window == 256);
  BOOST_TEST_REQUIRE(c.result.differs);
  BOOST_TEST(c.result.count > 0);
  // The kernel reads the boundary tile 128 rows further down the band than the mask holds it:
  // pairs at distance 512..639 decode as visible.
  BOOST_TEST(c.result.row - c.result.col >= 512);
  BOOST_TEST(c.result.decoded_visible);
  BOOST_TEST(!c.result.expected_visible);

  const MaskCheckCase d = check_compressed_mask(160, 385, AtbSample::python, AtbSample::cpp);
  BOOST_TEST(d.generated.block == 64);
  BOOST_TEST(d.assumed.block == 96);
  BOOST_TEST(d.result.differs);
  // Below 3B for both block sizes the formulas agree (T = W), so crossing is harmless.
  for (AtbSample g : kAllAtbSamples)
    for (AtbSample r : kAllAtbSamples) BOOST_TEST(!check_compressed_mask(128, 129, g, r).result.differs);
}

BOOST_AUTO_TEST_CASE(decoder_catches_an_effective_window_off_by_one) {
  const std::int64_t w = 1000;
  const Mask m = compressed(AtbSample::python, 128, w);
  TileWalkRule rule = tile_walk_rule(AtbSample::python, 128, w);
  BOOST_TEST(!compare_with_window(decode_compressed_mask(m, rule, w + 512), w).differs);
  rule.geometry.effective_window += 1;
  const MaskDisagreement bad = compare_with_window(decode_compressed_mask(m, rule, w + 512), w);
  BOOST_TEST_REQUIRE(bad.differs);
  BOOST_TEST(bad.row - bad.col == w - 1);  // the oldest key of the window is lost
  BOOST_TEST(!bad.decoded_visible);
  BOOST_TEST(bad.detail.find("first at") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(reads_outside_the_mask_are_flagged) {
  const std::int64_t w = 1000;
  const Mask m = compressed(AtbSample::python, 128, w);
  TileWalkRule rule = tile_walk_rule(AtbSample::python, 128, w);
  rule.geometry.effective_window = 600;  // boundary tiles now read past row 511
  const DecodedMask dec = decode_compressed_mask(m, rule, w + 512);
  BOOST_TEST(dec.out_of_range);
  const MaskDisagreement r = compare_with_window(dec, w);
  BOOST_TEST(r.differs);
  BOOST_TEST(r.detail.find("outside the 512-row mask") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tiles_are_classified_without_reading_the_mask) {
  // A mask of all zeros decodes as visible wherever it is read: fully hidden tiles must stay hidden.
  Mask zeros = compressed(AtbSample::python, 128, 200);
  std::fill(zeros.values.begin(), zeros.values.end(), 0.f);
  const DecodedMask dec = decode_compressed_mask(zeros, tile_walk_rule(AtbSample::python, 128, 200), 1024);
  BOOST_TEST(!dec.at(1023, 0));      // far outside the window: skipped
  BOOST_TEST(dec.at(1023, 1023 - 150));  // fully visible tile
  BOOST_TEST(!dec.at(0, 200));       // key tile after the query tile: causal, skipped
  BOOST_TEST(dec.at(0, 1));          // the diagonal tile is read from the mask, zeros here
}
