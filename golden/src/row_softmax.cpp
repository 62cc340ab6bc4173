#include "row_softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "swa/compensated.hpp"

namespace swa::golden::detail {

namespace {

// One TwoSum step on a register-held (sum, err) pair.
inline void accumulate(double& sum, double& err, double x) {
  const double s = sum + x;
  const double z = s - sum;
  err += (sum - (s - z)) + (x - z);
  sum = s;
}

}  // namespace

double dot_exact_products(const double* a, const double* b, int n) {
  // Eight independent TwoSum lanes vectorise; the lanes are merged with one more compensated sum.
  constexpr int kLanes = 8;
  double sum[kLanes] = {}, err[kLanes] = {};
  int d = 0;
  for (; d + kLanes <= n; d += kLanes)
    for (int l = 0; l < kLanes; ++l) accumulate(sum[l], err[l], a[d + l] * b[d + l]);
  CompensatedSum total;
  for (; d < n; ++d) total.add(a[d] * b[d]);
  for (int l = 0; l < kLanes; ++l) total.add(sum[l]);
  for (int l = 0; l < kLanes; ++l) total.add(err[l]);
  return total.value();
}

void scores_from_transposed(const double* q, const double* kT, std::int64_t key_stride, std::int64_t first,
                            std::int64_t count, int head_size, double scale, std::vector<double>& scores,
                            std::vector<double>& err) {
  const std::size_t base = scores.size();
  scores.resize(base + count, 0.0);
  err.assign(count, 0.0);
  double* __restrict sum = scores.data() + base;
  double* __restrict e = err.data();
  const double* __restrict k = kT + first;
  int d = 0;
  // Four dims per pass keep each key's (sum, err) in registers; the order over d is unchanged.
  for (; d + 4 <= head_size; d += 4) {
    const double q0 = q[d], q1 = q[d + 1], q2 = q[d + 2], q3 = q[d + 3];
    const double* k0 = k + d * key_stride;
    const double* k1 = k0 + key_stride;
    const double* k2 = k1 + key_stride;
    const double* k3 = k2 + key_stride;
    for (std::int64_t j = 0; j < count; ++j) {
      double s = sum[j], c = e[j];
      accumulate(s, c, q0 * k0[j]);
      accumulate(s, c, q1 * k1[j]);
      accumulate(s, c, q2 * k2[j]);
      accumulate(s, c, q3 * k3[j]);
      sum[j] = s;
      e[j] = c;
    }
  }
  for (; d < head_size; ++d)
    for (std::int64_t j = 0; j < count; ++j) accumulate(sum[j], e[j], q[d] * k[d * key_stride + j]);
  for (std::int64_t j = 0; j < count; ++j) sum[j] = scale * (sum[j] + e[j]);
}

void soft_cap(double* scores, std::size_t count, double cap) {
  if (cap == 0.0) return;
  for (std::size_t j = 0; j < count; ++j) scores[j] = cap * std::tanh(scores[j] / cap);
}

RowStats softmax_times_values(RowScratch& scratch, int head_size, double* out, double sink) {
  std::vector<double>& p = scratch.scores;
  const std::size_t keys = p.size();
  if (keys == 0) {
    std::fill(out, out + head_size, 0.0);
    return {sink, sink};
  }
  const double row_max = std::max(*std::max_element(p.begin(), p.end()), sink);
  CompensatedSum denominator;
  if (sink > -std::numeric_limits<double>::infinity()) denominator.add(std::exp(sink - row_max));
  for (double& s : p) {
    s = std::exp(s - row_max);
    denominator.add(s);
  }
  const double l = denominator.value();

  scratch.acc_sum.assign(head_size, 0.0);
  scratch.acc_err.assign(head_size, 0.0);
  double* __restrict sum = scratch.acc_sum.data();
  double* __restrict err = scratch.acc_err.data();
  std::size_t j = 0;
  // Four keys per pass keep each dim's (sum, err) in registers; the order over keys is unchanged.
  for (; j + 4 <= keys; j += 4) {
    const double p0 = p[j], p1 = p[j + 1], p2 = p[j + 2], p3 = p[j + 3];
    const double* __restrict v0 = scratch.values[j];
    const double* __restrict v1 = scratch.values[j + 1];
    const double* __restrict v2 = scratch.values[j + 2];
    const double* __restrict v3 = scratch.values[j + 3];
    for (int d = 0; d < head_size; ++d) {
      double s = sum[d], c = err[d];
      accumulate(s, c, p0 * v0[d]);
      accumulate(s, c, p1 * v1[d]);
      accumulate(s, c, p2 * v2[d]);
      accumulate(s, c, p3 * v3[d]);
      sum[d] = s;
      err[d] = c;
    }
  }
  for (; j < keys; ++j)
    for (int d = 0; d < head_size; ++d) accumulate(sum[d], err[d], p[j] * scratch.values[j][d]);
  for (int d = 0; d < head_size; ++d) out[d] = (sum[d] + err[d]) / l;
  for (double& pj : p) pj /= l;
  return {row_max, row_max + std::log(l)};
}

}  // namespace swa::golden::detail
