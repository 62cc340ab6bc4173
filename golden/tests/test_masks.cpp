#define BOOST_TEST_MODULE golden_masks
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "swa/atb_masks.hpp"

using namespace swa;

namespace {
const int kHeadSizes[] = {64, 80, 96, 128, 160, 192, 256};
const std::int64_t kWindows[] = {1, 2, 3, 127, 128, 129, 383, 384, 385, 512, 4096};

Mask make(MaskType type, std::int64_t window, std::int64_t max_seq, DType dt, AtbSample gen, int head_size = 128) {
  MaskSpec s;
  s.type = type;
  s.window = window;
  s.max_seq = max_seq;
  s.dtype = dt;
  s.generator = gen;
  s.head_size = head_size;
  return generate_mask(s);
}
}  // namespace

// The doc's worked example: max(seqLen) = 5, windowSize = 3 (figures 8 and 9).
BOOST_AUTO_TEST_CASE(swa_norm_worked_example) {
  const int pattern[5][5] = {{0, 1, 1, 1, 1}, {0, 0, 1, 1, 1}, {0, 0, 0, 1, 1}, {1, 0, 0, 0, 1}, {1, 1, 0, 0, 0}};
  for (DType dt : {DType::fp16, DType::bf16})
    for (AtbSample gen : kAllAtbSamples) {
      const Mask m = make(MaskType::swa_norm, 3, 5, dt, gen);
      BOOST_TEST_REQUIRE(m.rows == 5);
      BOOST_TEST_REQUIRE(m.cols == 5);
      const float fill = dt == DType::fp16 ? -65536.f : 1.f;
      for (int r = 0; r < 5; ++r)
        for (int c = 0; c < 5; ++c)
          BOOST_TEST(m.values[r * 5 + c] == (pattern[r][c] ? fill : 0.f),
                     "dtype " << dtype_name(dt) << " generator " << sample_name(gen) << " at (" << r << "," << c << ")");
    }
}

BOOST_AUTO_TEST_CASE(fill_values_and_their_casts) {
  BOOST_TEST(atb_mask_fill(DType::fp16) == -65536.f);
  BOOST_TEST(std::isinf(atb_mask_fill_cast(DType::fp16)));
  BOOST_TEST(atb_mask_fill_cast(DType::fp16) < 0.f);
  BOOST_TEST(atb_mask_fill(DType::bf16) == 1.f);
  BOOST_TEST(atb_mask_fill_cast(DType::bf16) == 1.f);
  BOOST_CHECK_THROW(atb_mask_fill(DType::fp32), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(swa_norm_generators_agree_and_match_the_band) {
  for (std::int64_t w : {1, 2, 5, 16, 40, 41})
    for (DType dt : {DType::fp16, DType::bf16}) {
      const Mask py = make(MaskType::swa_norm, w, 40, dt, AtbSample::python);
      const Mask cc = make(MaskType::swa_norm, w, 40, dt, AtbSample::cpp);
      BOOST_TEST(py.values == cc.values, "window " << w);
      for (int r = 0; r < 40; ++r)
        for (int c = 0; c < 40; ++c) BOOST_TEST_REQUIRE(py.visible(r, c) == (c <= r && r - c < w));
    }
}

BOOST_AUTO_TEST_CASE(window_at_least_seq_is_the_causal_triangle) {
  for (std::int64_t w : {5, 6, 100}) {
    const Mask swa = make(MaskType::swa_norm, w, 5, DType::fp16, AtbSample::python);
    const Mask tri = make(MaskType::causal, w, 5, DType::fp16, AtbSample::python);
    BOOST_TEST(swa.values == tri.values);
  }
  const Mask nc = make(MaskType::norm_compress, 1, 1, DType::bf16, AtbSample::python);
  BOOST_TEST(nc.rows == 128);
  BOOST_TEST(nc.visible(127, 0));
  BOOST_TEST(!nc.visible(0, 1));
  BOOST_TEST(nc.values[1] == 1.f);
}

BOOST_AUTO_TEST_CASE(compress_geometry_follows_each_sample) {
  // python: B = 64 above head size 128; cpp: B = 16384 / D / 16 * 16.
  BOOST_TEST(compress_geometry(AtbSample::python, 160, 1).block == 64);
  BOOST_TEST(compress_geometry(AtbSample::cpp, 160, 1).block == 96);
  BOOST_TEST(compress_geometry(AtbSample::cpp, 192, 1).block == 80);
  BOOST_TEST(compress_geometry(AtbSample::cpp, 256, 1).block == 64);
  BOOST_TEST(compress_geometry(AtbSample::cpp, 128, 1).block == 128);
  // A window that is a multiple of B beyond 3B: python keeps 3B, cpp keeps 2B.
  BOOST_TEST(compress_geometry(AtbSample::python, 128, 512).effective_window == 384);
  BOOST_TEST(compress_geometry(AtbSample::cpp, 128, 512).effective_window == 256);
  BOOST_TEST(compress_geometry(AtbSample::python, 128, 4096).effective_window == 384);
  BOOST_TEST(compress_geometry(AtbSample::cpp, 128, 4096).effective_window == 256);
  // Otherwise both keep W mod B above 2B, and W itself up to 3B.
  for (AtbSample s : kAllAtbSamples) {
    BOOST_TEST(compress_geometry(s, 64, 385).effective_window == 257);
    BOOST_TEST(compress_geometry(s, 64, 384).effective_window == 384);
    BOOST_TEST(compress_geometry(s, 64, 3).effective_window == 3);
  }
  BOOST_CHECK_THROW(compress_geometry(AtbSample::cpp, 2048, 10), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(compressed_masks_over_the_grid) {
  for (int d : kHeadSizes)
    for (std::int64_t w : kWindows)
      for (AtbSample gen : kAllAtbSamples)
        for (DType dt : {DType::fp16, DType::bf16}) {
          const Mask m = make(MaskType::swa_compress, w, 1, dt, gen, d);
          const CompressGeometry g = compress_geometry(gen, d, w);
          BOOST_TEST_REQUIRE(m.rows == 512);
          BOOST_TEST_REQUIRE(m.cols == 512);
          BOOST_TEST_REQUIRE(m.effective_window == g.effective_window);
          BOOST_TEST_REQUIRE(g.effective_window <= 3 * g.block);
          BOOST_TEST_REQUIRE(g.effective_window % g.block == w % g.block);
          const float fill = atb_mask_fill(dt);
          std::int64_t wrong = 0, first_wrong = -1;
          for (int r = 0; r < 512; ++r)
            for (int c = 0; c < 512; ++c) {
              const bool vis = c <= r && r - c < g.effective_window;
              if (m.values[r * 512 + c] == (vis ? 0.f : fill)) continue;
              if (wrong++ == 0) first_wrong = r * 512 + c;
            }
          BOOST_TEST(wrong == 0, "D=" << d << " W=" << w << " gen=" << sample_name(gen) << " first wrong element "
                                      << first_wrong);
        }
}

BOOST_AUTO_TEST_CASE(names_and_bad_specs) {
  for (MaskType t : kAllMaskTypes) BOOST_TEST((parse_mask_type(mask_type_name(t)) == t));
  BOOST_TEST(!parse_mask_type("dense").has_value());
  BOOST_CHECK_THROW(make(MaskType::swa_norm, 0, 5, DType::fp16, AtbSample::python), std::invalid_argument);
  BOOST_CHECK_THROW(make(MaskType::swa_norm, 3, 5, DType::fp32, AtbSample::python), std::invalid_argument);
}
