#define BOOST_TEST_MODULE golden_row_kernels
// The golden's register-blocked row kernels against their arithmetic spelled out one key and one
// dim at a time: the blocking (rows, lanes, dims per pass) must never change a bit.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../src/row_softmax.hpp"

using namespace swa::golden::detail;

namespace {

// Float-valued doubles, as the golden's inputs are: their products are exact.
std::vector<double> float_values(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<double>(normal(rng));
  return v;
}

void two_sum(double& sum, double& err, double x) {
  const double s = sum + x;
  const double z = s - sum;
  err += (sum - (s - z)) + (x - z);
  sum = s;
}

// row_softmax.hpp's score: per key, plain sums of kScoreBlock dims folded into a (sum, err) pair.
double score_by_hand(const double* q, const double* tile, int key, int head_size, double scale) {
  double sum = 0, err = 0;
  int d = 0;
  for (; d + kScoreBlock <= head_size; d += kScoreBlock) {
    double block = q[d] * tile[d * kKeyTile + key];
    for (int t = 1; t < kScoreBlock; ++t) block += q[d + t] * tile[(d + t) * kKeyTile + key];
    two_sum(sum, err, block);
  }
  for (; d < head_size; ++d) two_sum(sum, err, q[d] * tile[d * kKeyTile + key]);
  return scale * (sum + err);
}

}  // namespace

BOOST_AUTO_TEST_CASE(tile_scores_of_any_key_range_equal_one_key_at_a_time) {
  std::mt19937 rng(11);
  for (int head_size : {8, 13, 16, 40, 64, 72, 80, 96, 128, 136, 256}) {
    const std::vector<double> tile = float_values(static_cast<std::size_t>(head_size) * kKeyTile, rng);
    const std::vector<double> q = float_values(head_size, rng);
    for (int first = 0; first < kKeyTile; ++first)
      for (int count = 1; first + count <= kKeyTile; ++count) {
        std::vector<double> out(count);
        scores_in_tile(q.data(), tile.data(), first, count, head_size, 0.125, out.data());
        for (int j = 0; j < count; ++j)
          BOOST_TEST(out[j] == score_by_hand(q.data(), tile.data(), first + j, head_size, 0.125),
                     "D=" << head_size << " first " << first << " count " << count << " key " << j);
      }
  }
}

BOOST_AUTO_TEST_CASE(value_sums_equal_one_dim_at_a_time) {
  std::mt19937 rng(12);
  for (int head_size : {4, 36, 64, 72, 96, 128, 136, 200}) {
    for (std::int64_t first_key : {0, 5, 16, 31}) {
      const std::size_t count = 77;
      // Weights are full doubles (exp of a score), so their products with values round.
      std::vector<double> p(count);
      std::uniform_real_distribution<double> weight(0.0, 1.0);
      for (double& x : p) x = weight(rng);
      const std::vector<double> v = float_values(count * head_size, rng);
      std::vector<double> sum(head_size, 0.0), err(head_size, 0.0);
      accumulate_values(p.data(), v.data(), first_key, count, head_size, sum.data(), err.data());
      for (int d = 0; d < head_size; ++d) {
        double s = 0, e = 0, block = 0;
        for (std::size_t j = 0; j < count; ++j) {
          block = std::fma(p[j], v[j * head_size + d], block);
          const bool block_ends = (first_key + static_cast<std::int64_t>(j) + 1) % kValueBlock == 0 || j + 1 == count;
          if (block_ends) {
            two_sum(s, e, block);
            block = 0;
          }
        }
        BOOST_TEST(sum[d] == s, "D=" << head_size << " first " << first_key << " dim " << d);
        BOOST_TEST(err[d] == e, "D=" << head_size << " first " << first_key << " dim " << d);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(row_max_is_max_element_bit_for_bit) {
  // exponentiate's row maximum (lanes, with a scalar answer for NaN and zero) against
  // std::max_element on the same scores: every length past the 16-key steps, the maximum in every
  // place, NaN and both zeros.
  std::mt19937 rng(13);
  const double inf = std::numeric_limits<double>::infinity();
  auto check = [&](std::vector<double> scores, double sink, const char* what) {
    const double want = std::max(*std::max_element(scores.begin(), scores.end()), sink);
    const double got = exponentiate(scores.data(), scores.size(), sink).row_max;
    const bool same = std::isnan(want) ? std::isnan(got) : (got == want && std::signbit(got) == std::signbit(want));
    BOOST_TEST(same, what << ": count " << scores.size() << " got " << got << " want " << want);
  };
  for (std::size_t count = 1; count <= 70; ++count) {
    std::vector<double> scores = float_values(count, rng);
    check(scores, -inf, "normal");
    check(scores, 0.5, "normal, sink 0.5");
    for (std::size_t at = 0; at < count; at += 5) {
      std::vector<double> peak = scores;
      peak[at] = 40.0;
      check(peak, -inf, "peak");
      std::vector<double> nan = scores;
      nan[at] = std::numeric_limits<double>::quiet_NaN();
      check(nan, -inf, "NaN");
    }
    std::vector<double> zeros(count, -0.0);
    check(zeros, -inf, "-0");
    zeros[count / 2] = 0.0;
    check(zeros, -inf, "-0 and +0");
    if (count >= 32) {
      std::vector<double> signs(count, -1.0);  // -0 first; +0 later, in a register reduced before
      signs[5] = -0.0;
      signs[16] = 0.0;
      check(signs, -inf, "-0 before +0");
    }
    std::vector<double> lowest(count, -inf);
    check(lowest, -inf, "-inf");
  }
}
