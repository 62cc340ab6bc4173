#define BOOST_TEST_MODULE golden_row_kernels
// The golden's register-blocked row kernels against their arithmetic spelled out one key and one
// dim at a time: the blocking (rows, lanes, dims per pass) must never change a bit.
#include <boost/test/unit_test.hpp>
#include <cstdint>
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

// row_softmax.hpp's score: per key, plain sums of 8 dims folded into a (sum, err) pair.
double score_by_hand(const double* q, const double* tile, int key, int head_size, double scale) {
  double sum = 0, err = 0;
  int d = 0;
  for (; d + 8 <= head_size; d += 8) {
    double block = q[d] * tile[d * kKeyTile + key];
    for (int t = 1; t < 8; ++t) block += q[d + t] * tile[(d + t) * kKeyTile + key];
    two_sum(sum, err, block);
  }
  for (; d < head_size; ++d) two_sum(sum, err, q[d] * tile[d * kKeyTile + key]);
  return scale * (sum + err);
}

}  // namespace

BOOST_AUTO_TEST_CASE(tile_scores_of_any_key_range_equal_one_key_at_a_time) {
  std::mt19937 rng(11);
  for (int head_size : {8, 13, 64, 72, 128, 136}) {
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
  for (int head_size : {4, 36, 64, 72, 128, 136, 200}) {
    for (std::int64_t first_key : {0, 5, 16}) {
      const std::size_t count = 37;
      const std::vector<double> p = float_values(count, rng);
      const std::vector<double> v = float_values(count * head_size, rng);
      std::vector<double> sum(head_size, 0.0), err(head_size, 0.0);
      accumulate_values(p.data(), v.data(), first_key, count, head_size, sum.data(), err.data());
      for (int d = 0; d < head_size; ++d) {
        double s = 0, e = 0, block = 0;
        for (std::size_t j = 0; j < count; ++j) {
          block = block + p[j] * v[j * head_size + d];
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
