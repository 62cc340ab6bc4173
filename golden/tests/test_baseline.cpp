#define BOOST_TEST_MODULE golden_baseline
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "../src/key_tiles.hpp"
#include "problem.hpp"
#include "swa/baseline.hpp"

using namespace swa;

namespace {
double relative_l2(const std::vector<float>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}
}  // namespace

// Levels from numerics.md for N(0,1) inputs; the baseline's error must be of that order, neither
// zero (it would not be a same-precision baseline) nor far above it.
BOOST_AUTO_TEST_CASE(error_levels_per_dtype) {
  struct Level {
    DType dt;
    double low, high;
  };
  for (Level l : {Level{DType::fp32, 1e-9, 1e-5}, Level{DType::fp16, 5e-5, 2e-3}, Level{DType::bf16, 5e-4, 2e-2}}) {
    const test::Problem pr = test::make_problem({64, 33}, 4, 2, 64, {15, 0}, l.dt, 3);
    const auto g = golden::attention_dense(pr.params);
    const auto b = baseline::attention(pr.params);
    const double err = relative_l2(b, g.out);
    BOOST_TEST_MESSAGE(dtype_name(l.dt) << " baseline relative L2 " << err);
    BOOST_TEST(err > l.low, dtype_name(l.dt));
    BOOST_TEST(err < l.high, dtype_name(l.dt));
    for (float x : b) BOOST_TEST_REQUIRE(round_to(l.dt, x) == x);  // outputs are values of the dtype
  }
}

BOOST_AUTO_TEST_CASE(baseline_respects_the_window) {
  // Changing a key outside every window changes nothing; inside it changes the output.
  test::Problem pr = test::make_problem({20}, 1, 1, 8, {2, 0}, DType::fp32, 4);
  const auto before = baseline::attention(pr.params);
  auto* k = reinterpret_cast<float*>(pr.k.data());
  k[10 * 8] += 5.f;  // key 10 is seen by queries 10..12 only
  const auto after = baseline::attention(pr.params);
  for (int t = 0; t < 20; ++t) {
    bool changed = false;
    for (int d = 0; d < 8; ++d) changed |= before[t * 8 + d] != after[t * 8 + d];
    BOOST_TEST(changed == (t >= 10 && t <= 12), "token " << t);
  }
}

BOOST_AUTO_TEST_CASE(row_without_visible_keys_outputs_zero) {
  golden::detail::KeyTiles keys;
  const std::vector<double> k(4, 1.0), v(4, 2.0), q(4, 1.0);
  keys.reset(4, 1);
  keys.append(k.data(), v.data());
  std::vector<double> out(4, 7.0);
  double lse = 7.0;
  golden::detail::BlockScratch s;
  s.rows.push_back({q.data(), 1, 1, -INFINITY, out.data(), &lse});
  golden::detail::attend_block(keys, 4, 1.0, 0.0, s);
  for (double x : out) BOOST_TEST(x == 0.0);
  BOOST_TEST(std::isinf(lse));
  BOOST_TEST(lse < 0);
}
