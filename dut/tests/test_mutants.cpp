#define BOOST_TEST_MODULE dut_mutants
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <random>

#include "baseline_dut.hpp"
#include "mutant_dut.hpp"
#include "swa/golden.hpp"

using namespace swa;
using namespace swa::dut;

namespace {

struct Case {
  std::vector<std::int32_t> lens;
  std::vector<std::int64_t> offsets;
  std::vector<float> q, k, v, out;
  AttnParams p;
};

Case make_case(std::vector<std::int32_t> lens, int hq, int hkv, int d, std::int64_t w, RunMode mode, CachePolicy cache,
               int chunk, int steps, double sigma = 1.0) {
  Case c;
  c.lens = std::move(lens);
  c.offsets.assign(c.lens.size() + 1, 0);
  for (std::size_t b = 0; b < c.lens.size(); ++b) c.offsets[b + 1] = c.offsets[b] + c.lens[b];
  const std::int64_t n = c.offsets.back();
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, sigma);
  auto fill = [&](std::vector<float>& t, std::int64_t count, double s) {
    t.resize(count);
    for (auto& x : t) x = static_cast<float>(s * normal(rng) / sigma);
  };
  fill(c.q, n * hq * d, sigma);
  fill(c.k, n * hkv * d, sigma);
  fill(c.v, n * hkv * d, 1.0);
  c.out.assign(n * hq * d, NAN);
  AttnParams& p = c.p;
  p.q = c.q.data();
  p.k = c.k.data();
  p.v = c.v.data();
  p.out = c.out.data();
  p.dtype = DType::fp32;
  p.batch = static_cast<int>(c.lens.size());
  p.seq_lens = c.lens.data();
  p.seq_offsets = c.offsets.data();
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_size = d;
  p.band = band_from_window(w, WindowConvention::keys_including_self);
  p.scale = default_scale(d);
  p.mode = mode;
  p.cache = cache;
  p.chunk = chunk;
  p.decode_steps = steps;
  set_contiguous_strides(p);
  return c;
}

double max_error(Case& c, Fault fault) {
  auto dut = make_mutant(fault);
  BOOST_TEST_REQUIRE(run_schedule(*dut, c.p).ok);
  const auto g = golden::run(c.p);
  double worst = 0;
  for (std::size_t i = 0; i < g.out.size(); ++i) {
    const double e = std::abs(c.out[i] - g.out[i]);
    if (!std::isfinite(e)) return INFINITY;  // std::max would drop a NaN
    worst = std::max(worst, e);
  }
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(fault_free_kernel_matches_the_golden_through_every_schedule) {
  for (CachePolicy cache : kAllCachePolicies) {
    Case chunked = make_case({37, 1, 20}, 4, 2, 16, 6, RunMode::chunked_prefill, cache, 7, 0);
    BOOST_TEST(max_error(chunked, Fault::none) < 1e-5, cache_name(cache));
    Case decode = make_case({30, 12}, 4, 2, 16, 6, RunMode::decode, cache, 5, 9);
    BOOST_TEST(max_error(decode, Fault::none) < 1e-5, cache_name(cache));
  }
  Case prefill = make_case({25, 3}, 4, 1, 24, 5, RunMode::prefill, CachePolicy::ring_modulo, 0, 0);
  BOOST_TEST(max_error(prefill, Fault::none) < 1e-5);
}

BOOST_AUTO_TEST_CASE(every_fault_changes_the_output_where_it_should) {
  auto prefill = [] { return make_case({40}, 8, 2, 16, 4, RunMode::prefill, CachePolicy::ring_modulo, 0, 0); };
  auto ring = [] { return make_case({40}, 4, 2, 16, 5, RunMode::chunked_prefill, CachePolicy::ring_modulo, 3, 0); };
  Case a = prefill(), b = prefill(), c = ring(), d = ring(), e = prefill(), f = prefill();
  BOOST_TEST(max_error(a, Fault::window_plus_one) > 1e-2);
  BOOST_TEST(max_error(b, Fault::window_minus_one) > 1e-2);
  BOOST_TEST(max_error(c, Fault::ring_slot_off_by_one) > 1e-2);
  BOOST_TEST(max_error(d, Fault::stale_slot_after_wrap) > 1e-2);
  BOOST_TEST(max_error(e, Fault::gqa_modulo_mapping) > 1e-2);
  BOOST_TEST(max_error(f, Fault::fp16_pv_accumulation) > 1e-5);
  Case big = make_case({20}, 2, 1, 64, 8, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, 30.0);
  BOOST_TEST(max_error(big, Fault::no_max_subtraction) == INFINITY);  // exp overflows: NaN
  // The linear cache has no slots to get wrong.
  Case linear = make_case({40}, 4, 2, 16, 5, RunMode::chunked_prefill, CachePolicy::linear, 3, 0);
  BOOST_TEST(max_error(linear, Fault::ring_slot_off_by_one) < 1e-5);
}

BOOST_AUTO_TEST_CASE(baseline_dut_writes_every_row_under_any_schedule) {
  for (RunMode mode : kAllRunModes) {
    Case c = make_case({17, 9}, 2, 1, 8, 4, mode, CachePolicy::ring_compact, 5, mode == RunMode::decode ? 4 : 0);
    auto dut = make_baseline_dut();
    BOOST_TEST_REQUIRE(run_schedule(*dut, c.p).ok);
    for (float x : c.out) BOOST_TEST_REQUIRE(std::isfinite(x));
  }
}

BOOST_AUTO_TEST_CASE(names_parse_back) {
  for (Fault f : kAllFaults) BOOST_TEST((parse_fault(fault_name(f)) == f));
  BOOST_TEST(!parse_fault("window_plus_two").has_value());
}
