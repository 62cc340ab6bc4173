#define BOOST_TEST_MODULE golden_expf_lanes
// The baseline's softmax exponentials: exp_of_differences must give std::exp(x - m) bit for bit, on
// every path (eight lanes, the special-case groups, the tail), whichever path this machine takes.
#include <boost/test/unit_test.hpp>
#include <cstdlib>  // __GLIBC__
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../src/expf_lanes.hpp"

using swa::golden::detail::exp_of_differences;

namespace {

std::size_t mismatches(const std::vector<float>& in, float m) {
  std::vector<float> got = in;
  exp_of_differences(got.data(), got.size(), m);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float want = std::exp(in[i] - m);
    wrong += std::bit_cast<std::uint32_t>(want) != std::bit_cast<std::uint32_t>(got[i]);  // NaN payloads too
  }
  return wrong;
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_fma_build_on_glibc_takes_the_eight_lane_path) {
  // The probe falls back to std::exp whenever the lanes differ from it, so the other tests would pass
  // with broken lanes: where the lanes are expected (glibc >= 2.28 runs this algorithm, fused on FMA
  // machines), their use is required.
#if defined(__AVX2__) && defined(__FMA__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 28)
  BOOST_TEST(swa::golden::detail::exp_lanes_in_use());
#else
  BOOST_TEST_MESSAGE("this build has no eight-lane exp: std::exp throughout");
#endif
}

BOOST_AUTO_TEST_CASE(equals_std_exp_on_a_stride_of_every_float) {
  // Every 257th float bit pattern: both signs, subnormals, |x| >= 88 (glibc's special cases),
  // infinities and NaNs, mixed into groups with ordinary values; an odd count for the tail.
  std::vector<float> in;
  for (std::uint64_t bits = 0; bits <= 0xffffffffull; bits += 257) in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  in.push_back(-1.5f);
  BOOST_TEST(in.size() % 8 != 0u);
  BOOST_TEST(mismatches(in, 0.f) == 0u);
}

BOOST_AUTO_TEST_CASE(equals_std_exp_on_softmax_arguments) {
  // What the baseline feeds it: scores minus their row maximum, so x - m <= 0, down to the range
  // where exp underflows (-88 .. -104) and past it, with the rounding of x - m to float in play.
  std::vector<float> in;
  for (int i = 0; i < 200001; ++i) in.push_back(-110.f + 110.f * static_cast<float>(i) / 200000.f);
  for (float m : {0.f, 3.25f, -17.5f, 1e-3f, 85.f})
    BOOST_TEST(mismatches(in, m) == 0u, "m = " << m);
  // Infinite and NaN maxima (a row of -inf scores; a NaN score) are the special-case path too.
  for (float m : {-std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    BOOST_TEST(mismatches({-1.f, 0.f, 2.f, -3.f, -4.f, -5.f, -6.f, -7.f, -8.f}, m) == 0u, "m = " << m);
}

BOOST_AUTO_TEST_CASE(equals_std_exp_on_its_hardest_rounding_cases) {
  // The 64 inputs (of all 2^32, by an exhaustive scan of this algorithm) whose double result lies
  // closest to a float rounding midpoint: any change to its arithmetic (an unfused reduction, a
  // constant's last bit) rounds one of these the other way first. An unfused r = x N / ln 2 - k,
  // which differs from std::exp on 2 inputs of 2^32, differs here.
  const std::uint32_t hardest[] = {
      0x3e73ade2, 0xb3000000, 0xbfde3004, 0xbbe861b2, 0x400d98c7, 0x3d8932e8, 0xba253b54,
      0x3b37991a, 0x33800000, 0x34dffffd, 0x343fffff, 0x37ff7f01, 0x337fffff, 0x4202422f,
      0x3b0b4517, 0x40143eb5, 0x3fbe11a6, 0x356ffff9, 0x35f7fff1, 0xb2ffffff, 0xc0d7626b,
      0x4197276c, 0xba921bd7, 0x40c12c37, 0x367bffe1, 0xbeae4609, 0xc1d2107a, 0x36fdffc1,
      0xbb378639, 0x387ebe05, 0xb2fffffe, 0xbe14c82c, 0xb9fbab76, 0x377eff81, 0x38fddc11,
      0xc068da36, 0xb9a56aae, 0xbf0fa174, 0x3b50125a, 0x337ffffe, 0x40a63bf9, 0x3d103181,
      0xb2fffffd, 0xbc70a558, 0xb3000001, 0x3b8f4138, 0xb4200001, 0xbc3f2901, 0xb3c00001,
      0xbac75bcb, 0xbd3e69a5, 0xb4b00002, 0xb8df930d, 0x3a29cdeb, 0xc27c65d9, 0xb5d4000b,
      0xbb57a63b, 0xb616000b, 0xbeb7bdad, 0xc2633f4c, 0xb2fffffc, 0x3df0cb95, 0x3998e24b,
      0xc23dd581};
  std::vector<float> in;
  for (std::uint32_t bits : hardest) in.push_back(std::bit_cast<float>(bits));
  BOOST_TEST(mismatches(in, 0.f) == 0u);
}
