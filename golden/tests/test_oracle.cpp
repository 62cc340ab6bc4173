#define BOOST_TEST_MODULE golden_oracle
// The golden against an independent 50-digit oracle (Boost.Multiprecision), written plainly from
// the definition: softmax(scale * q.k over the window) . v.
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/test/unit_test.hpp>

#include "problem.hpp"

using namespace swa;
using Big = boost::multiprecision::cpp_bin_float_50;

namespace {

std::vector<double> oracle(const AttnParams& p) {
  const int D = p.head_size;
  std::vector<double> out(static_cast<std::size_t>(total_tokens(p)) * p.heads_q * D);
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
          w.push_back(s * Big(p.scale));
          keys.push_back(j);
        }
        Big total = 0;
        for (Big& x : w) {
          x = exp(x);
          total += x;
        }
        for (int d = 0; d < D; ++d) {
          Big acc = 0;
          for (std::size_t n = 0; n < keys.size(); ++n)
            acc += w[n] * at(p.v, row0 + keys[n], p.v_row_stride, kvh, p.v_head_stride, d);
          out[(static_cast<std::size_t>(row0 + i) * p.heads_q + h) * D + d] = static_cast<double>(acc / total);
        }
      }
    }
  return out;
}

void check_against_oracle(const test::Problem& pr, double bound) {
  const auto g = golden::attention_dense(pr.params);
  const auto o = oracle(pr.params);
  double worst_elementwise = 0;
  for (std::size_t i = 0; i < o.size(); ++i)
    worst_elementwise = std::max(worst_elementwise, std::abs(g.out[i] - o[i]) / std::max(std::abs(o[i]), 1e-3));
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
