#define BOOST_TEST_MODULE harness_metrics
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "swa/harness/judge/metrics.hpp"

using namespace swa;
using namespace swa::harness;

namespace {

// The definitions one element at a time in index order: an oracle apart from compare's lanes.
Comparison one_at_a_time(const std::vector<float>& out, const std::vector<double>& ref, DType dtype, double threshold) {
  Comparison c;
  c.elements = static_cast<std::int64_t>(out.size());
  for (double r : ref) c.ref_max_abs = std::max(c.ref_max_abs, std::abs(r));
  c.rel_floor = 1e-2 * c.ref_max_abs;
  long double sum_abs = 0, sum_sq = 0, ref_sq = 0, out_sq = 0, dot = 0, sum_ulp = 0;
  std::int64_t finite = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double o = out[i], r = ref[i];
    if (!std::isfinite(o)) {
      (std::isnan(o) ? c.nan_count : c.inf_count)++;
      if (c.first_nonfinite < 0) c.first_nonfinite = static_cast<std::int64_t>(i);
      continue;
    }
    ++finite;
    const double e = std::abs(o - r);
    if (c.worst_index < 0 || e > c.max_abs) {
      c.max_abs = e;
      c.worst_index = static_cast<std::int64_t>(i);
    }
    c.max_rel = std::max(c.max_rel, e / std::max(std::abs(r), c.rel_floor));
    c.out_max_abs = std::max(c.out_max_abs, std::abs(o));
    const std::int64_t ulp = ulp_distance(dtype, out[i], static_cast<float>(r));
    c.max_ulp = std::max(c.max_ulp, ulp);
    sum_ulp += ulp;
    sum_abs += e;
    sum_sq += static_cast<long double>(e) * e;
    ref_sq += static_cast<long double>(r) * r;
    out_sq += static_cast<long double>(o) * o;
    dot += static_cast<long double>(o) * r;
    c.over_threshold += threshold > 0 && e > threshold;
  }
  if (finite > 0) {
    c.mean_abs = static_cast<double>(sum_abs / finite);
    c.rms = static_cast<double>(std::sqrt(sum_sq / finite));
    c.mean_ulp = static_cast<double>(sum_ulp / finite);
  }
  c.rel_l2 = ref_sq > 0 ? static_cast<double>(std::sqrt(sum_sq / ref_sq)) : 0;
  c.nmse = ref_sq > 0 ? static_cast<double>(sum_sq / ref_sq) : 0;
  c.cosine = ref_sq > 0 && out_sq > 0 ? static_cast<double>(dot / std::sqrt(ref_sq * out_sq)) : 0;
  return c;
}

void check_same(const Comparison& got, const Comparison& want, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    // Counts, maxima and positions are exact in any order.
    BOOST_TEST(got.elements == want.elements);
    BOOST_TEST(got.nan_count == want.nan_count);
    BOOST_TEST(got.inf_count == want.inf_count);
    BOOST_TEST(got.first_nonfinite == want.first_nonfinite);
    BOOST_TEST(got.max_abs == want.max_abs);
    BOOST_TEST(got.worst_index == want.worst_index);
    BOOST_TEST(got.max_rel == want.max_rel);
    BOOST_TEST(got.rel_floor == want.rel_floor);
    BOOST_TEST(got.ref_max_abs == want.ref_max_abs);
    BOOST_TEST(got.out_max_abs == want.out_max_abs);
    BOOST_TEST(got.max_ulp == want.max_ulp);
    BOOST_TEST(got.mean_ulp == want.mean_ulp);  // a sum of integers: exact
    BOOST_TEST(got.over_threshold == want.over_threshold);
    // Sums: the lanes' order against long double, a few ulps of a double apart.
    const auto tol = boost::test_tools::tolerance(1e-13);
    BOOST_TEST(got.mean_abs == want.mean_abs, tol);
    BOOST_TEST(got.rms == want.rms, tol);
    BOOST_TEST(got.rel_l2 == want.rel_l2, tol);
    BOOST_TEST(got.nmse == want.nmse, tol);
    BOOST_TEST(got.cosine == want.cosine, tol);
  }
}

// n reference values drawn N(0, 1) and outputs within about 1e-3 of them, rounded to the dtype.
struct NearPair {
  std::vector<double> ref;
  std::vector<float> out;
};
NearPair near_pair(std::size_t n, DType dt, std::mt19937_64& rng, std::normal_distribution<double>& normal) {
  NearPair p{std::vector<double>(n), std::vector<float>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    p.ref[i] = normal(rng);
    p.out[i] = round_to(dt, static_cast<float>(p.ref[i] * (1 + 1e-3 * normal(rng))));
  }
  return p;
}

}  // namespace

BOOST_AUTO_TEST_CASE(compare_equals_the_element_by_element_definitions) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  // Lengths around the 8 lanes and the 1024-element chunks.
  for (std::size_t n : {1u, 7u, 8u, 9u, 17u, 1023u, 1024u, 1025u, 3001u}) {
    for (DType dt : kAllDTypes) {
      auto [ref, out] = near_pair(n, dt, rng, normal);
      const std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      check_same(compare(out, ref, dt, 1e-3), one_at_a_time(out, ref, dt, 1e-3), what);
      // The largest error exactly twice (in different lanes where n allows): the first index is the
      // worst; then NaN and Inf here and there.
      for (std::size_t i : {n / 3, n - 1}) {
        ref[i] = 1.0;
        out[i] = 6.0f;
      }
      check_same(compare(out, ref, dt, 0), one_at_a_time(out, ref, dt, 0), what + " with a tie");
      out[n - 1] = std::numeric_limits<float>::quiet_NaN();
      if (n > 3) out[3] = -std::numeric_limits<float>::infinity();
      check_same(compare(out, ref, dt, 1e-3), one_at_a_time(out, ref, dt, 1e-3), what + " with NaN and Inf");
    }
  }
}

// The reference's largest magnitude (the relative error's floor) wherever it lies: every position of
// lengths around the lanes and the four interleaved maxima of 32 elements, among NaNs (which never
// win), -0 and smaller values of both signs.
BOOST_AUTO_TEST_CASE(ref_max_abs_finds_the_largest_magnitude_at_every_position) {
  for (std::size_t n : {1u, 2u, 7u, 8u, 9u, 31u, 32u, 33u, 40u, 63u, 64u, 65u, 97u, 200u}) {
    for (std::size_t at = 0; at < n; ++at) {
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i)
        ref[i] = i % 5 == 1 ? std::numeric_limits<double>::quiet_NaN() : i % 5 == 2 ? -0.0 : (i % 2 ? 1.0 : -1.0) * (i % 7);
      ref[at] = -7.5;
      const std::vector<float> out(n, 0.5f);
      BOOST_TEST_CONTEXT("n=" << n << " at=" << at) { BOOST_TEST(compare(out, ref, DType::fp32, 0).ref_max_abs == 7.5); }
    }
  }
}

BOOST_AUTO_TEST_CASE(chunks_with_and_without_a_nonfinite_output_sum_the_same_bits) {
  // compare takes a 1024-element chunk whose outputs are all finite through fewer operations, and
  // one holding a NaN or Inf the general way. An element whose output and reference are both +0
  // adds +0 to every sum and raises no maximum, as a left-out NaN does: with one such element in
  // every chunk, the outputs with NaN there (every chunk the general way) and with +0 there (every
  // chunk the short way) must give the same sums, bit for bit.
  std::mt19937_64 rng(13);
  std::normal_distribution<double> normal;
  const std::size_t n = 3 * 1024 + 21;
  for (DType dt : kAllDTypes) {
    auto [ref, out] = near_pair(n, dt, rng, normal);
    std::vector<float> with_nan = out;
    for (const std::size_t at : {std::size_t{700}, std::size_t{1024 + 5}, std::size_t{2048 + 1000}, n - 3}) {
      ref[at] = 0.0;
      out[at] = 0.0f;
      with_nan[at] = std::numeric_limits<float>::quiet_NaN();
    }
    const Comparison general = compare(with_nan, ref, dt, 1e-3), short_way = compare(out, ref, dt, 1e-3);
    BOOST_TEST_CONTEXT(dtype_name(dt)) {
      BOOST_TEST(general.nan_count == 4);
      BOOST_TEST(short_way.nan_count == 0);
      BOOST_TEST(general.first_nonfinite == 700);
      BOOST_TEST(general.rel_l2 == short_way.rel_l2);  // sum of squared errors and of squared references
      BOOST_TEST(general.nmse == short_way.nmse);
      BOOST_TEST(general.cosine == short_way.cosine);  // the dot product and the output's squares
      BOOST_TEST(general.max_abs == short_way.max_abs);
      BOOST_TEST(general.worst_index == short_way.worst_index);
      BOOST_TEST(general.max_rel == short_way.max_rel);
      BOOST_TEST(general.out_max_abs == short_way.out_max_abs);
      BOOST_TEST(general.max_ulp == short_way.max_ulp);
      BOOST_TEST(general.over_threshold == short_way.over_threshold);
      // The sums of errors and of ULP distances, over their counts of finite outputs.
      BOOST_TEST(general.mean_abs * (n - 4) == short_way.mean_abs * n, boost::test_tools::tolerance(1e-15));
      BOOST_TEST(general.mean_ulp * (n - 4) == short_way.mean_ulp * n, boost::test_tools::tolerance(1e-15));
    }
  }
}

BOOST_AUTO_TEST_CASE(compare_of_nothing_but_nan_counts_every_element) {
  const std::vector<float> out(13, std::numeric_limits<float>::quiet_NaN());
  const std::vector<double> ref(13, 1.0);
  const Comparison c = compare(out, ref, DType::bf16, 0.1);
  BOOST_TEST(c.nan_count == 13);
  BOOST_TEST(c.first_nonfinite == 0);
  BOOST_TEST(c.worst_index == -1);
  BOOST_TEST(c.mean_abs == 0.0);
}

BOOST_AUTO_TEST_CASE(error_norms_of_ranges_equal_compare_of_those_elements) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  const std::size_t n = 4000;
  auto [ref, out] = near_pair(n, DType::fp32, rng, normal);  // fp32: unrounded
  out[130] = std::numeric_limits<float>::quiet_NaN();  // left out, as compare leaves it out
  out[2500] = static_cast<float>(ref[2500] + 3);       // the largest error, outside the first ranges
  const std::vector<std::vector<ElementRange>> cases = {
      {{0, 640}}, {{0, 13}, {640, 1280}, {2000, 2003}}, {{120, 140}, {2496, 2600}}, {{3999, 4000}}, {}};
  for (const auto& ranges : cases) {
    std::vector<float> o;
    std::vector<double> r;
    for (const ElementRange& e : ranges) {
      o.insert(o.end(), out.begin() + e.first, out.begin() + e.last);
      r.insert(r.end(), ref.begin() + e.first, ref.begin() + e.last);
    }
    const Comparison want = one_at_a_time(o, r, DType::fp32, 0);
    const ErrorNorms got = error_norms(out, ref, ranges);
    BOOST_TEST_CONTEXT(ranges.size() << " ranges") {
      BOOST_TEST(got.max_abs == want.max_abs);
      BOOST_TEST(got.rel_l2 == want.rel_l2, boost::test_tools::tolerance(1e-13));
      BOOST_TEST(got.nmse == want.nmse, boost::test_tools::tolerance(1e-13));
    }
  }
}
