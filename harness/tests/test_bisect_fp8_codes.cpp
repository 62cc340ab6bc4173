// Bisect's fit of the FP8 codes a DUT stored (fp8_codes.cpp), on codes made by an encoder written here
// without the golden's codec: the region where they differ and what it stores there are named, and a
// handful of codes is not enough for high confidence.
#define BOOST_TEST_MODULE harness_bisect_fp8_codes
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "../src/bisect/fp8_codes.hpp"
#include "swa/kv_format.hpp"

using namespace swa;
using namespace swa::harness;

namespace swa::harness {
std::ostream& operator<<(std::ostream& o, Confidence c) { return o << confidence_name(c); }
}  // namespace swa::harness

namespace {

// An e4m3 encoder as a port writes it, on the exponent and mantissa: round the 3-bit mantissa to
// nearest even, and (the fault) when it rounds up to 8 keep the exponent, the mantissa masked to 0.
std::uint8_t e4m3_carry_dropped(double x) {
  const double a = std::abs(x);
  const std::uint8_t sign = x < 0 ? 0x80 : 0;
  if (a < std::ldexp(1.0, -6) || a >= 448) return fp8_encode(KvFormat::fp8_e4m3, x);  // outside the normals: as the spec
  const int e = static_cast<int>(std::floor(std::log2(a)));
  const double scaled = (a / std::ldexp(1.0, e) - 1) * 8;
  double q = std::nearbyint(scaled);  // ties to even (the default rounding mode)
  if (q == 8) q = 0;                  // the carry into the exponent dropped
  return static_cast<std::uint8_t>(sign | ((e + 7) << 3) | static_cast<int>(q));
}

std::vector<CacheMismatch> slots_stored_with(std::uint8_t (*encode)(double), int slots, int elements) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0, 30);
  std::vector<CacheMismatch> all;
  for (int s = 0; s < slots; ++s) {
    CacheMismatch m;
    m.slot = s, m.expected = s, m.held_kind = CacheMismatch::Held::no_position;
    for (int i = 0; i < elements; ++i) {
      const double x = normal(rng);
      const std::uint8_t want = fp8_encode(KvFormat::fp8_e4m3, x), got = encode(x);
      m.codes.push_back({i % 2 == 1, 0, i / 2, x, want, got, want != got});
    }
    all.push_back(m);
  }
  return all;
}

AttnParams e4m3_params() {
  AttnParams p;
  p.kv_format = KvFormat::fp8_e4m3;
  p.k_descale = 1 / 97.3f, p.v_descale = 1 / 61.1f;
  return p;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_dropped_rounding_carry_is_located_and_fitted) {
  const auto f = fit_fp8_codes(slots_stored_with(e4m3_carry_dropped, 16, 128), e4m3_params());
  BOOST_TEST_REQUIRE(f.has_value());
  BOOST_TEST(f->name == "fp8_encoding_differs_on_carry_into_exponent", f->name << ": " << f->evidence.front());
  BOOST_TEST(f->evidence.front().find("every element of it differs") != std::string::npos, f->evidence.front());
  BOOST_TEST(f->evidence[1].find("half the spec's value") != std::string::npos, f->evidence[1]);
  BOOST_TEST(f->confidence == Confidence::high, f->why);
  BOOST_TEST(f->reproduced);
}

BOOST_AUTO_TEST_CASE(a_few_codes_are_not_enough_for_high_confidence) {
  // One slot of 16 elements: a carry or two, a region told by too few codes.
  const auto f = fit_fp8_codes(slots_stored_with(e4m3_carry_dropped, 1, 16), e4m3_params());
  if (f) BOOST_TEST(f->confidence != Confidence::high, f->name << ": " << f->why);
  // The spec's own codes: nothing differs, nothing to fit.
  BOOST_TEST(!fit_fp8_codes(slots_stored_with([](double x) { return fp8_encode(KvFormat::fp8_e4m3, x); }, 4, 64), e4m3_params()));
}
