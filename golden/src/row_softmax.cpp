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
  // kLanes plain partial sums (lane l takes terms l, l + kLanes, ...: vectorises over the lanes), folded
  // into a compensated sum every kBlock terms per lane; the lanes' (sum, err) pairs are then merged by
  // one more compensated sum. golden/README.md states the error bound.
  constexpr int kLanes = 8, kBlock = 8;
  double sum[kLanes] = {}, err[kLanes] = {};
  int d = 0;
  for (; d + kLanes * kBlock <= n; d += kLanes * kBlock) {
    double block[kLanes];
    for (int l = 0; l < kLanes; ++l) block[l] = a[d + l] * b[d + l];
    for (int t = 1; t < kBlock; ++t)
      for (int l = 0; l < kLanes; ++l) block[l] += a[d + t * kLanes + l] * b[d + t * kLanes + l];
    for (int l = 0; l < kLanes; ++l) accumulate(sum[l], err[l], block[l]);
  }
  CompensatedSum total;
  for (; d < n; ++d) total.add(a[d] * b[d]);
  for (int l = 0; l < kLanes; ++l) total.add(sum[l]);
  for (int l = 0; l < kLanes; ++l) total.add(err[l]);
  return total.value();
}

void scores_tile(const double* q, const double* kT, std::int64_t key_stride, std::int64_t first, std::int64_t count,
                 int head_size, double scale, double* __restrict sum, double* __restrict e) {
  for (std::int64_t j = 0; j < count; ++j) sum[j] = e[j] = 0.0;
  const double* __restrict k = kT + first;
  // Per key: a plain sum of kBlock dims (the products are exact), then one TwoSum into the key's
  // (sum, err). Vectorises over keys; each key's arithmetic does not depend on first or count.
  constexpr int kBlock = 8;
  const std::int64_t st = key_stride;
  int d = 0;
  for (; d + kBlock <= head_size; d += kBlock) {
    const double* kd = k + d * st;
    const double q0 = q[d], q1 = q[d + 1], q2 = q[d + 2], q3 = q[d + 3];
    const double q4 = q[d + 4], q5 = q[d + 5], q6 = q[d + 6], q7 = q[d + 7];
    for (std::int64_t j = 0; j < count; ++j) {
      double block = q0 * kd[j];
      block += q1 * kd[st + j];
      block += q2 * kd[2 * st + j];
      block += q3 * kd[3 * st + j];
      block += q4 * kd[4 * st + j];
      block += q5 * kd[5 * st + j];
      block += q6 * kd[6 * st + j];
      block += q7 * kd[7 * st + j];
      double s = sum[j], c = e[j];
      accumulate(s, c, block);
      sum[j] = s;
      e[j] = c;
    }
  }
  for (; d < head_size; ++d)
    for (std::int64_t j = 0; j < count; ++j) accumulate(sum[j], e[j], q[d] * k[d * st + j]);
  for (std::int64_t j = 0; j < count; ++j) sum[j] = scale * (sum[j] + e[j]);
}

void scores_from_transposed(const double* q, const double* kT, std::int64_t key_stride, std::int64_t first,
                            std::int64_t count, int head_size, double scale, std::vector<double>& scores,
                            std::vector<double>& err) {
  const std::size_t base = scores.size();
  scores.resize(base + count, 0.0);
  err.resize(count);
  scores_tile(q, kT, key_stride, first, count, head_size, scale, scores.data() + base, err.data());
}

void soft_cap(double* scores, std::size_t count, double cap) {
  if (cap == 0.0) return;
  for (std::size_t j = 0; j < count; ++j) scores[j] = cap * std::tanh(scores[j] / cap);
}

RowNorm exponentiate(double* scores, std::size_t count, double sink) {
  if (count == 0) return {sink, 0.0};
  const double row_max = std::max(*std::max_element(scores, scores + count), sink);
  CompensatedSum denominator;
  if (sink > -std::numeric_limits<double>::infinity()) denominator.add(std::exp(sink - row_max));
  for (std::size_t j = 0; j < count; ++j) {
    scores[j] = std::exp(scores[j] - row_max);
    denominator.add(scores[j]);
  }
  return {row_max, denominator.value()};
}

void accumulate_values(const double* p, const double* const* values, std::int64_t first_key, std::size_t count,
                       int head_size, double* __restrict sum, double* __restrict err, double* __restrict block) {
  for (std::size_t j = 0; j < count;) {
    // This block ends at the next multiple of kValueBlock in key numbering.
    const std::int64_t key = first_key + static_cast<std::int64_t>(j);
    const std::size_t n = std::min<std::size_t>(count - j, static_cast<std::size_t>(kValueBlock - key % kValueBlock));
    for (int d = 0; d < head_size; ++d) block[d] = 0.0;
    std::size_t t = j;
    for (; t + 4 <= j + n; t += 4) {
      const double p0 = p[t], p1 = p[t + 1], p2 = p[t + 2], p3 = p[t + 3];
      const double* __restrict v0 = values[t];
      const double* __restrict v1 = values[t + 1];
      const double* __restrict v2 = values[t + 2];
      const double* __restrict v3 = values[t + 3];
      for (int d = 0; d < head_size; ++d) block[d] = block[d] + p0 * v0[d] + p1 * v1[d] + p2 * v2[d] + p3 * v3[d];
    }
    for (; t < j + n; ++t) {
      const double pt = p[t];
      const double* __restrict vt = values[t];
      for (int d = 0; d < head_size; ++d) block[d] = block[d] + pt * vt[d];
    }
    for (int d = 0; d < head_size; ++d) {
      double s = sum[d], c = err[d];
      accumulate(s, c, block[d]);
      sum[d] = s;
      err[d] = c;
    }
    j += n;
  }
}

RowStats finish_row(const RowNorm& norm, const double* sum, const double* err, int head_size, double* out) {
  if (norm.l == 0.0) {
    std::fill(out, out + head_size, 0.0);
    return {norm.row_max, norm.row_max};
  }
  for (int d = 0; d < head_size; ++d) out[d] = (sum[d] + err[d]) / norm.l;
  return {norm.row_max, norm.row_max + std::log(norm.l)};
}

RowStats softmax_times_values(RowScratch& scratch, int head_size, double* out, double sink, std::int64_t first_key) {
  std::vector<double>& p = scratch.scores;
  if (p.empty()) {
    std::fill(out, out + head_size, 0.0);
    return {sink, sink};
  }
  const RowNorm norm = exponentiate(p.data(), p.size(), sink);
  scratch.acc_sum.assign(head_size, 0.0);
  scratch.acc_err.assign(head_size, 0.0);
  scratch.block.resize(head_size);
  accumulate_values(p.data(), scratch.values.data(), first_key, p.size(), head_size, scratch.acc_sum.data(),
                    scratch.acc_err.data(), scratch.block.data());
  const RowStats stats = finish_row(norm, scratch.acc_sum.data(), scratch.acc_err.data(), head_size, out);
  for (double& pj : p) pj /= norm.l;
  return stats;
}

}  // namespace swa::golden::detail
