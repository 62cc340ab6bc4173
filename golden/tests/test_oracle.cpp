#define BOOST_TEST_MODULE golden_oracle
// The golden against an independent 50-digit oracle (Boost.Multiprecision), written plainly from
// the definition: softmax(cap(scale * q.k) over the window, plus the head's sink logit) . v.
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/test/unit_test.hpp>

#include "problem.hpp"

using namespace swa;
using Big = boost::multiprecision::cpp_bin_float_50;

namespace {

struct OracleOutput {
  std::vector<double> out;
  // sum_j p_j |v_jd|: the size of the terms output element d sums (its condition). An error in the
  // weights of relative size e moves the element by at most e times this, whatever |out| is.
  std::vector<double> magnitude;
};

OracleOutput oracle(const AttnParams& p) {
  const int D = p.head_size;
  OracleOutput r;
  r.out.resize(static_cast<std::size_t>(total_tokens(p)) * p.heads_q * D);
  r.magnitude.resize(r.out.size());
  auto at = [&](const void* base, std::int64_t row, std::int64_t row_stride, int h, std::int64_t head_stride, int d) {
    return Big(load_from(p.dtype, static_cast<const unsigned char*>(base) +
                                      (row * row_stride + h * head_stride + d) * dtype_bytes(p.dtype)));
  };
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int kvh = h / (p.heads_q / p.heads_kv);
      const std::int64_t row0 = p.seq_offsets[b];
      for (std::int64_t i = 0; i < p.seq_lens[b]; ++i) {
        std::vector<Big> w;
        std::vector<std::int64_t> keys;
        for (std::int64_t j = 0; j < p.seq_lens[b]; ++j) {
          if (!band_visible(p.band, i, j)) continue;
          Big s = 0;
          for (int d = 0; d < D; ++d)
            s += at(p.q, row0 + i, p.q_row_stride, h, p.q_head_stride, d) *
                 at(p.k, row0 + j, p.k_row_stride, kvh, p.k_head_stride, d);
          s *= Big(p.scale);
          if (p.softcap > 0) s = Big(p.softcap) * tanh(s / Big(p.softcap));
          w.push_back(s);
          keys.push_back(j);
        }
        Big total = p.sinks ? exp(Big(p.sinks[h])) : Big(0);
        for (Big& x : w) {
          x = exp(x);
          total += x;
        }
        for (int d = 0; d < D; ++d) {
          Big acc = 0, size = 0;
          for (std::size_t n = 0; n < keys.size(); ++n) {
            const Big v = at(p.v, row0 + keys[n], p.v_row_stride, kvh, p.v_head_stride, d);
            acc += w[n] * v;
            size += w[n] * abs(v);
          }
          const std::size_t e = (static_cast<std::size_t>(row0 + i) * p.heads_q + h) * D + d;
          r.out[e] = keys.empty() ? 0.0 : static_cast<double>(acc / total);
          r.magnitude[e] = keys.empty() ? 0.0 : static_cast<double>(size / total);
        }
      }
    }
  return r;
}

// The bound (golden/README.md): every element within `bound` of its condition sum_j p_j |v_jd|, and
// normwise. Exact products and TwoSum sums leave one rounding per score (2u|s|) and, with a
// soft-cap, tanh's (a few ulps of the cap); the weights then carry a relative error of a few
// 1e-14 at |s| or cap 50..100, under 1e-13 of the condition.
void check_against_oracle(const test::Problem& pr, double bound) {
  const auto g = golden::attention_dense(pr.params);
  const auto [o, magnitude] = oracle(pr.params);
  double worst_elementwise = 0;
  for (std::size_t i = 0; i < o.size(); ++i)
    worst_elementwise = std::max(worst_elementwise,
                                 magnitude[i] > 0 ? std::abs(g.out[i] - o[i]) / magnitude[i] : std::abs(g.out[i]));
  BOOST_TEST(test::normwise_relative(g.out, o) <= bound);
  BOOST_TEST(worst_elementwise <= bound);
  BOOST_TEST(test::max_abs(o) > 0.0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(small_random_cases_within_1e_13) {
  std::uint64_t seed = 1;
  for (DType dt : kAllDTypes)
    for (std::int64_t w : {1, 3, 8, 64})
      check_against_oracle(
          test::make_problem({1, 9, 23}, 4, 2, 24, band_from_window(w, WindowConvention::keys_including_self), dt, seed++),
          1e-13);
}

BOOST_AUTO_TEST_CASE(large_logits_within_1e_13) {
  // Scores of order 100: the max subtraction and the exact products are what keep this accurate.
  check_against_oracle(test::make_problem({31}, 2, 1, 64, {5, 0}, DType::fp32, 99, 4.0), 1e-13);
  check_against_oracle(test::make_problem({17, 4}, 2, 2, 40, causal_band(), DType::bf16, 7, 6.0), 1e-13);
}

BOOST_AUTO_TEST_CASE(row_trace_matches_the_output) {
  const test::Problem pr = test::make_problem({12}, 2, 1, 16, {3, 0}, DType::fp16, 5);
  const auto g = golden::attention_dense(pr.params);
  const auto t = golden::trace_row(pr.params, 0, 1, 7);
  BOOST_TEST(t.key_positions == (std::vector<std::int64_t>{4, 5, 6, 7}));
  double psum = 0;
  for (double x : t.probabilities) psum += x;
  BOOST_TEST(psum == 1.0, boost::test_tools::tolerance(1e-15));
  for (int d = 0; d < 16; ++d) BOOST_TEST(t.out[d] == g.out[(7 * 2 + 1) * 16 + d]);
  BOOST_TEST(t.lse == g.lse[7 * 2 + 1]);
  BOOST_TEST(t.row_max >= t.scores[0]);
}

BOOST_AUTO_TEST_CASE(soft_cap_within_1e_13) {
  // Large logits (scores of order 100) capped at 50 and at 5: tanh saturates, the order survives.
  for (float cap : {50.f, 5.f}) {
    test::Problem pr = test::make_problem({31, 7}, 4, 2, 64, {7, 0}, DType::fp32, 11, 4.0);
    pr.params.softcap = cap;
    check_against_oracle(pr, 1e-13);
  }
  test::Problem bf = test::make_problem({19}, 2, 1, 40, causal_band(), DType::bf16, 12, 3.0);
  bf.params.softcap = 30.f;
  check_against_oracle(bf, 1e-13);
}

BOOST_AUTO_TEST_CASE(sinks_within_1e_13) {
  std::uint64_t seed = 40;
  for (DType dt : kAllDTypes)
    for (double mean : {-3.0, 0.0, 4.0}) {  // a sink below, among and above the scores
      test::Problem pr = test::make_problem({1, 9, 23}, 4, 2, 24, {2, 0}, dt, seed++);
      test::add_sinks(pr, seed++, mean);
      check_against_oracle(pr, 1e-13);
    }
  test::Problem both = test::make_problem({25}, 2, 2, 32, {-1, 3}, DType::fp16, 77, 3.0);
  test::add_sinks(both, 78);
  both.params.softcap = 20.f;
  check_against_oracle(both, 1e-13);
}

BOOST_AUTO_TEST_CASE(two_sided_window_within_1e_13) {
  for (WindowBand band : {WindowBand{3, 2}, WindowBand{0, 4}, WindowBand{-1, 1}, WindowBand{2, -1}})
    check_against_oracle(test::make_problem({1, 12, 20}, 2, 1, 16, band, DType::fp32, 90), 1e-13);
}

BOOST_AUTO_TEST_CASE(hand_derived_sink_equal_to_every_score) {
  // Every key the same vector: every score is scale * q.k = s. With the sink set to s too, each of
  // the n visible keys and the sink weigh 1/(n+1), so the output is n/(n+1) of the mean of V.
  test::Problem pr = test::make_problem({6}, 1, 1, 8, {3, 0}, DType::fp32, 5);
  auto* k = reinterpret_cast<float*>(pr.k.data());
  auto* q = reinterpret_cast<float*>(pr.q.data());
  for (int j = 0; j < 6; ++j) std::fill_n(q + j * 8, 8, 0.5f);
  for (int d = 0; d < 8; ++d) k[d] = 0.25f * static_cast<float>(d % 3);
  for (int j = 1; j < 6; ++j) std::copy_n(k, 8, k + j * 8);
  pr.params.scale = 0.5f;  // every product below is exact
  double s = 0;
  for (int d = 0; d < 8; ++d) s += 0.5 * k[d];
  pr.sinks = {static_cast<float>(s * 0.5)};
  BOOST_REQUIRE(static_cast<double>(pr.sinks[0]) == s * 0.5);
  pr.params.sinks = pr.sinks.data();
  const auto g = golden::attention_dense(pr.params);
  const auto* v = reinterpret_cast<const float*>(pr.v.data());
  for (std::int64_t i = 0; i < 6; ++i) {
    const std::int64_t first = std::max<std::int64_t>(0, i - 3), n = i - first + 1;
    for (int d = 0; d < 8; ++d) {
      double sum = 0;
      for (std::int64_t j = first; j <= i; ++j) sum += v[j * 8 + d];
      BOOST_TEST(g.out[i * 8 + d] == sum / static_cast<double>(n + 1), boost::test_tools::tolerance(1e-14));
    }
  }
}

BOOST_AUTO_TEST_CASE(hand_derived_soft_cap) {
  // Two keys with scaled scores 100 and 0 under cap 1: weights e^tanh(100) : e^tanh(0) = e : 1.
  test::Problem pr = test::make_problem({2}, 1, 1, 1, causal_band(), DType::fp32, 6);
  auto* q = reinterpret_cast<float*>(pr.q.data());
  auto* k = reinterpret_cast<float*>(pr.k.data());
  auto* v = reinterpret_cast<float*>(pr.v.data());
  q[0] = q[1] = 10.f;
  k[0] = 10.f;  // scale 1 (head size 1): q1.k0 = 100
  k[1] = 0.f;
  v[0] = 1.f;
  v[1] = 0.f;
  pr.params.softcap = 1.f;
  const auto g = golden::attention_dense(pr.params);
  const double e = std::exp(std::tanh(100.0));
  BOOST_TEST(g.out[1] == e / (e + 1.0), boost::test_tools::tolerance(1e-15));
}
