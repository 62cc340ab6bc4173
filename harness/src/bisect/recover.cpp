#include "recover.hpp"

#include "semantics.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "swa/golden.hpp"
#include "swa/kv_format.hpp"

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

std::int64_t candidate_count(const AttnParams& p) { return total_tokens(p) * p.heads_kv; }

namespace {
// V as floats: drawn problems have them; one built from a golden cache entry keeps storage only.
void require_float_values(const Problem& pr) {
  if (pr.v.size() != static_cast<std::size_t>(total_tokens(pr.params)) * pr.params.heads_kv * pr.params.head_size)
    throw std::logic_error("bisect: the problem's float V is missing (build it without the golden cache)");
}
}  // namespace

RecoveredRow recover_row(const Problem& pr, const std::vector<double>& out, int sequence, std::int64_t token,
                         int q_head) {
  require_float_values(pr);
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
    // V as attention reads it: FP8 KV quantises it (kv_read_value is the identity otherwise).
    for (int x = 0; x < d; ++x)
      a[static_cast<std::size_t>(c) * d + x] = kv_read_value(p.kv_format, p.v_descale, pr.v[(row * hkv + k.kv_head) * d + x]);
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


const char* finding_source_name(FindingSource s) {
  switch (s) {
    case FindingSource::reading_reproduced: return "reading reproduced";
    case FindingSource::variant: return "variant";
    case FindingSource::recovered_attention: return "recovered attention";
    case FindingSource::non_finite_output: return "non-finite output";
    case FindingSource::value_storage: return "value storage";
    case FindingSource::cache_check: return "cache check";
    case FindingSource::band_measured: return "band measured";
    case FindingSource::output_placement: return "output placement";
    case FindingSource::key_runs_measured: return "key runs measured";
    case FindingSource::none: return "none";
  }
  return "none";
}

std::optional<Finding> narrow_value_storage(const Problem& pr, const std::vector<double>& out,
                                            const std::vector<double>& ref, double threshold) {
  require_float_values(pr);
  const AttnParams& p = pr.params;
  if (p.sinks || p.dtype != DType::fp32) return std::nullopt;  // a sink makes no row a single key's
  const int d = p.head_size, hkv = p.heads_kv;
  for (const DType narrow : {DType::fp16, DType::bf16}) {
    int told = 0, failing = 0;
    std::string example;
    for (int b = 0; b < p.batch && failing < 64; ++b)
      for (std::int64_t t = 0; t < p.seq_lens[b] && failing < 64; ++t) {
        if (band_end_key(p.band, t, p.seq_lens[b]) - band_first_key(p.band, t) != 1) continue;
        const std::int64_t key = band_first_key(p.band, t);
        const std::size_t row = static_cast<std::size_t>(pr.seq_offsets[b] + t);
        for (int h = 0; h < p.heads_q; ++h) {
          const float* v = &pr.v[((static_cast<std::size_t>(pr.seq_offsets[b] + key)) * hkv + kv_head_for(h, p.heads_q, hkv)) * d];
          const double* o = &out[(row * p.heads_q + h) * d];
          const double* g = &ref[(row * p.heads_q + h) * d];
          double error = 0, to_narrow = 0;
          for (int x = 0; x < d; ++x) {
            error = std::max(error, std::abs(o[x] - g[x]));
            to_narrow = std::max(to_narrow, std::abs(o[x] - round_to(narrow, static_cast<float>(v[x]))));
          }
          if (!(error > threshold)) continue;
          ++failing;
          if (to_narrow <= 1e-7 * (1 + std::abs(v[0]))) {
            if (told++ == 0) {
              std::ostringstream e;
              e << "query " << t << " of sequence " << b << " (head " << h << ") sees one key, position " << key
                << ", so its output is that key's V row; the DUT's equals the V row rounded to " << dtype_name(narrow)
                << " in every element (error to the golden " << error << ")";
              example = e.str();
            }
          }
        }
      }
    if (failing > 0 && told == failing)
      return Finding{std::string("kv_stored_as_") + std::string(dtype_name(narrow)), FindingSource::value_storage,
                     {example, std::to_string(told) + " of " + std::to_string(told) +
                                   " failing single-key rows alike: K/V are held in " + std::string(dtype_name(narrow)) +
                                   " (a cache or staging buffer narrower than the layer's fp32)"}};
  }
  return std::nullopt;
}

}  // namespace swa::harness
