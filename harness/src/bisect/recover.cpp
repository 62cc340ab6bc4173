#include "recover.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <sstream>

#include "swa/golden.hpp"

namespace swa::harness {

std::vector<double> nonnegative_least_squares(const std::vector<double>& a, int rows, int cols,
                                              const std::vector<double>& b) {
  const Eigen::Map<const Eigen::MatrixXd> A(a.data(), rows, cols);
  const Eigen::Map<const Eigen::VectorXd> B(b.data(), rows);
  Eigen::VectorXd w = Eigen::VectorXd::Zero(cols);
  std::vector<bool> passive(cols, false);
  const double tol = 1e-12 * std::max(1.0, A.cwiseAbs().maxCoeff() * B.cwiseAbs().maxCoeff()) * cols;
  // Least squares on the passive set, zero elsewhere.
  auto solve_passive = [&] {
    std::vector<int> idx;
    for (int j = 0; j < cols; ++j)
      if (passive[j]) idx.push_back(j);
    Eigen::MatrixXd Ap(rows, static_cast<Eigen::Index>(idx.size()));
    for (std::size_t k = 0; k < idx.size(); ++k) Ap.col(static_cast<Eigen::Index>(k)) = A.col(idx[k]);
    const Eigen::VectorXd zp = Ap.colPivHouseholderQr().solve(B);
    Eigen::VectorXd z = Eigen::VectorXd::Zero(cols);
    for (std::size_t k = 0; k < idx.size(); ++k) z[idx[k]] = zp[static_cast<Eigen::Index>(k)];
    return z;
  };
  for (int outer = 0; outer < 3 * cols + 10; ++outer) {
    const Eigen::VectorXd gradient = A.transpose() * (B - A * w);
    int best = -1;
    for (int j = 0; j < cols; ++j)
      if (!passive[j] && gradient[j] > tol && (best < 0 || gradient[j] > gradient[best])) best = j;
    if (best < 0) break;
    passive[best] = true;
    for (int inner = 0; inner < 3 * cols + 10; ++inner) {
      const Eigen::VectorXd z = solve_passive();
      bool feasible = true;
      double alpha = 1.0;
      for (int j = 0; j < cols; ++j)
        if (passive[j] && z[j] <= 0) {
          feasible = false;
          alpha = std::min(alpha, w[j] / (w[j] - z[j]));
        }
      if (feasible) {
        w = z;
        break;
      }
      w += alpha * (z - w);
      for (int j = 0; j < cols; ++j)
        if (passive[j] && w[j] <= 1e-15) {
          passive[j] = false;
          w[j] = 0;
        }
    }
  }
  return {w.data(), w.data() + cols};
}

RecoveredRow recover_row(const Problem& pr, const std::vector<double>& out, int sequence, std::int64_t token,
                         int q_head) {
  const AttnParams& p = pr.params;
  const int d = p.head_size, hkv = p.heads_kv;
  const int own_kv = kv_head_for(q_head, p.heads_q, p.heads_kv);
  RecoveredRow r;
  r.sequence = sequence;
  r.token = token;
  r.q_head = q_head;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t j = 0; j < p.seq_lens[b]; ++j)
      for (int g = 0; g < hkv; ++g) r.candidates.push_back({b, j, g});
  const int n = static_cast<int>(r.candidates.size());
  r.well_posed = d >= 2 * n;
  std::vector<double> a(static_cast<std::size_t>(d) * n), o(d);
  for (int c = 0; c < n; ++c) {
    const AttentionCandidate& k = r.candidates[c];
    const std::size_t row = static_cast<std::size_t>(pr.seq_offsets[k.sequence] + k.position);
    for (int x = 0; x < d; ++x) a[static_cast<std::size_t>(c) * d + x] = pr.v[(row * hkv + k.kv_head) * d + x];
  }
  const std::size_t q_row = static_cast<std::size_t>(pr.seq_offsets[sequence] + token);
  for (int x = 0; x < d; ++x) o[x] = out[(q_row * p.heads_q + q_head) * d + x];
  r.weights = nonnegative_least_squares(a, d, n, o);
  double residual = 0, norm = 0;
  for (int x = 0; x < d; ++x) {
    double fit = 0;
    for (int c = 0; c < n; ++c) fit += a[static_cast<std::size_t>(c) * d + x] * r.weights[c];
    residual += (fit - o[x]) * (fit - o[x]);
    norm += o[x] * o[x];
  }
  r.relative_residual = norm > 0 ? std::sqrt(residual / norm) : std::sqrt(residual);
  const golden::RowTrace trace = golden::trace_row(p, sequence, q_head, token);
  r.golden.assign(n, 0.0);
  r.scores.assign(n, std::nan(""));
  for (int c = 0; c < n; ++c) {
    const AttentionCandidate& k = r.candidates[c];
    if (k.sequence != sequence || k.kv_head != own_kv) continue;
    const auto it = std::find(trace.key_positions.begin(), trace.key_positions.end(), k.position);
    if (it == trace.key_positions.end()) continue;
    const std::size_t i = static_cast<std::size_t>(it - trace.key_positions.begin());
    r.golden[c] = trace.probabilities[i];
    r.scores[c] = trace.scores[i];
  }
  return r;
}

namespace {

// Weights below this are read as zero: the fit's noise from an output rounded to the dtype.
double weight_noise(DType dt) { return dt == DType::fp32 ? 0.005 : dt == DType::fp16 ? 0.02 : 0.08; }

std::string describe_key(const AttentionCandidate& k, const RecoveredRow& r, const AttnParams& p) {
  const int own_kv = kv_head_for(r.q_head, p.heads_q, p.heads_kv);
  std::ostringstream o;
  if (k.sequence != r.sequence) {
    o << "position " << k.position << " of sequence " << k.sequence << " (another sequence)";
    return o.str();
  }
  if (k.kv_head != own_kv) {
    o << "position " << k.position << " of kv head " << k.kv_head << " (query head " << r.q_head << " reads kv head "
      << own_kv << ")";
    return o.str();
  }
  const std::int64_t distance = r.token - k.position;
  o << "position " << k.position;
  if (distance == 0) o << " (the query's own key)";
  else if (distance < 0) o << " (" << -distance << " after the query: a future key)";
  else if (p.band.left >= 0 && distance == p.band.left + 1) o << " (one past the window's lower edge)";
  else if (p.band.left >= 0 && distance > p.band.left + 1)
    o << " (" << distance - p.band.left - 1 << " below the window's lower edge)";
  else if (p.band.left >= 0 && distance == p.band.left) o << " (the window's oldest key)";
  else o << " (" << distance << " before the query, inside the window)";
  return o.str();
}

}  // namespace

std::string describe_recovery(const RecoveredRow& r, const AttnParams& p) {
  std::ostringstream o;
  const int n = static_cast<int>(r.candidates.size());
  o << "Recovered attention of sequence " << r.sequence << ", token " << r.token << ", head " << r.q_head
    << " (non-negative least squares over " << n << " V rows in " << p.head_size << " dimensions, residual "
    << r.relative_residual << "):\n";
  if (!r.well_posed) {
    o << "   not told: " << n << " candidate keys need at least " << 2 * n
      << " dimensions for a well-posed fit; the case has " << p.head_size << ".\n";
    return o.str();
  }
  if (r.relative_residual > 0.05) {
    o << "   output_outside_the_values: no non-negative combination of V rows gives the output (residual "
      << r.relative_residual << "): the kernel does not compute a weighted average of the values it was "
      << "given (a wrong V row stride, values from a narrower type, or arithmetic on the output).\n";
    return o.str();
  }
  const double noise = weight_noise(p.dtype);
  const int own_kv = kv_head_for(r.q_head, p.heads_q, p.heads_kv);
  std::vector<int> extra, missing;
  double dut_sum = 0, golden_sum = 0;
  for (int c = 0; c < n; ++c) {
    dut_sum += r.weights[c];
    golden_sum += r.golden[c];
    if (r.golden[c] == 0 && r.weights[c] > noise) extra.push_back(c);
    if (r.golden[c] > noise && r.weights[c] < 0.25 * r.golden[c]) missing.push_back(c);
  }
  auto any_extra = [&](auto predicate) {
    return std::any_of(extra.begin(), extra.end(), [&](int c) { return predicate(r.candidates[c]); });
  };
  std::string name;
  if (any_extra([&](const AttentionCandidate& k) { return k.sequence != r.sequence; })) name = "cross_sequence_leak";
  else if (any_extra([&](const AttentionCandidate& k) { return k.kv_head != own_kv; })) name = "wrong_kv_head";
  else if (any_extra([&](const AttentionCandidate& k) { return k.position > r.token + std::max<std::int64_t>(p.band.right, 0) && p.band.right >= 0; }))
    name = "future_keys";
  else if (any_extra([&](const AttentionCandidate& k) { return p.band.left >= 0 && r.token - k.position > p.band.left; }))
    name = "keys_below_the_window";
  else if (!extra.empty()) name = "extra_keys";
  else if (std::any_of(missing.begin(), missing.end(), [&](int c) { return r.candidates[c].position == r.token; }))
    name = "own_key_dropped";
  else if (!missing.empty()) name = "keys_dropped";
  std::ostringstream evidence;
  for (int c : extra)
    evidence << "   the DUT gives " << describe_key(r.candidates[c], r, p) << " weight " << r.weights[c]
             << "; the golden gives it 0\n";
  for (int c : missing)
    evidence << "   the DUT gives " << describe_key(r.candidates[c], r, p) << " weight " << r.weights[c]
             << "; the golden gives it " << r.golden[c] << "\n";
  if (name.empty()) {
    // The right keys: compare how they are weighed. log w - log p = (alpha - 1) s + c for a kernel
    // whose scores are alpha times the golden's.
    double sx = 0, sy = 0, sxx = 0, sxy = 0, m = 0;
    for (int c = 0; c < n; ++c)
      if (r.golden[c] > 1e-3 && r.weights[c] > 1e-3 && std::isfinite(r.scores[c])) {
        const double x = r.scores[c], y = std::log(r.weights[c] / dut_sum) - std::log(r.golden[c] / golden_sum);
        sx += x, sy += y, sxx += x * x, sxy += x * y, m += 1;
      }
    // Two keys determine the slope already (the intercept absorbs the normalisation).
    const double slope = m >= 2 && m * sxx - sx * sx > 1e-12 ? (m * sxy - sx * sy) / (m * sxx - sx * sx) : 0;
    if (std::abs(dut_sum - golden_sum) > 2 * noise) {
      name = "weights_do_not_sum_right";
      evidence << "   the DUT's weights sum to " << dut_sum << ", the golden's to " << golden_sum
               << (golden_sum < 0.999 ? " (the rest is the sink's)" : "")
               << ": the normalisation is wrong (a denominator missing a tile or the sink, or one too many)\n";
    } else if (std::abs(slope) > 0.05) {
      name = "wrong_scale";
      evidence << "   the DUT's log-weights follow the golden scores with slope " << 1 + slope
               << ": it scales the scores by " << 1 + slope << " x the golden's scale " << p.scale << " (that is "
               << (1 + slope) * p.scale << ")\n";
    } else {
      name = "weights_differ";
      int worst = 0;
      for (int c = 0; c < n; ++c)
        if (std::abs(r.weights[c] - r.golden[c]) > std::abs(r.weights[worst] - r.golden[worst])) worst = c;
      evidence << "   the right keys with slightly different weights; the largest difference: "
               << describe_key(r.candidates[worst], r, p) << " " << r.weights[worst] << " against " << r.golden[worst]
               << " (precision, not which keys)\n";
    }
  }
  o << "   " << name << "\n" << evidence.str();
  return o.str();
}

}  // namespace swa::harness
