#include "row_softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "swa/compensated.hpp"

namespace swa::golden::detail {

double dot_exact_products(const double* a, const double* b, int n) {
  // Eight independent TwoSum lanes vectorise; the lanes are merged with one more compensated sum.
  constexpr int kLanes = 8;
  double sum[kLanes] = {}, err[kLanes] = {};
  int d = 0;
  for (; d + kLanes <= n; d += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const double x = a[d + l] * b[d + l];
      const double s = sum[l] + x;
      const double z = s - sum[l];
      err[l] += (sum[l] - (s - z)) + (x - z);
      sum[l] = s;
    }
  CompensatedSum total;
  for (; d < n; ++d) total.add(a[d] * b[d]);
  for (int l = 0; l < kLanes; ++l) total.add(sum[l]);
  for (int l = 0; l < kLanes; ++l) total.add(err[l]);
  return total.value();
}

RowStats softmax_times_values(RowScratch& scratch, int head_size, double* out) {
  std::vector<double>& p = scratch.scores;
  const std::size_t keys = p.size();
  if (keys == 0) {
    std::fill(out, out + head_size, 0.0);
    const double ninf = -std::numeric_limits<double>::infinity();
    return {ninf, ninf};
  }
  const double row_max = *std::max_element(p.begin(), p.end());
  CompensatedSum denominator;
  for (double& s : p) {
    s = std::exp(s - row_max);
    denominator.add(s);
  }
  const double l = denominator.value();

  scratch.acc_sum.assign(head_size, 0.0);
  scratch.acc_err.assign(head_size, 0.0);
  double* sum = scratch.acc_sum.data();
  double* err = scratch.acc_err.data();
  for (std::size_t j = 0; j < keys; ++j) {
    const double pj = p[j];
    const double* v = scratch.values[j];
    for (int d = 0; d < head_size; ++d) {
      const double x = pj * v[d];
      const double s = sum[d] + x;
      const double z = s - sum[d];
      err[d] += (sum[d] - (s - z)) + (x - z);
      sum[d] = s;
    }
  }
  for (int d = 0; d < head_size; ++d) out[d] = (sum[d] + err[d]) / l;
  for (double& pj : p) pj /= l;
  return {row_max, row_max + std::log(l)};
}

}  // namespace swa::golden::detail
