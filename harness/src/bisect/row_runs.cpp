#include "row_runs.hpp"

#include <algorithm>
#include <cmath>

#include "swa/kv_format.hpp"

namespace swa::harness::key_run_rules {

RowRuns::RowRuns(const Problem& pr, const RowPlace& r) : d_(pr.params.head_size), n_(r.last_key + 1) {
  const AttnParams& p = pr.params;
  const int hkv = p.heads_kv, g = kv_head_for(r.h, p.heads_q, hkv);
  const std::int64_t off = pr.seq_offsets[r.b];
  const float* q = &pr.q[(static_cast<std::size_t>(off + r.t) * p.heads_q + r.h) * d_];
  std::vector<double> s(n_);
  double top = p.sinks ? static_cast<double>(p.sinks[r.h]) : -INFINITY;
  for (std::int64_t j = 0; j < n_; ++j) {
    const float* k = &pr.k[(static_cast<std::size_t>(off + j) * hkv + g) * d_];
    double dot = 0;
    for (int x = 0; x < d_; ++x) dot += static_cast<double>(q[x]) * kv_read_value(p.kv_format, p.k_descale, k[x]);
    double score = static_cast<double>(p.scale) * dot;
    if (p.softcap > 0.f) score = p.softcap * std::tanh(score / p.softcap);
    s[j] = score;
    top = std::max(top, score);
  }
  top_ = top;
  sink_ = p.sinks ? std::exp(static_cast<long double>(p.sinks[r.h]) - top) : 0.0L;
  zero_ = std::exp(static_cast<long double>(-top));
  num_.assign(static_cast<std::size_t>(n_ + 1) * d_, 0.0L);
  den_.assign(static_cast<std::size_t>(n_ + 1), 0.0L);
  for (std::int64_t j = 0; j < n_; ++j) {
    const long double w = std::exp(static_cast<long double>(s[j] - top));
    const float* v = &pr.v[(static_cast<std::size_t>(off + j) * hkv + g) * d_];
    den_[j + 1] = den_[j] + w;
    for (int x = 0; x < d_; ++x)
      num_[(j + 1) * d_ + x] = num_[j * d_ + x] + w * kv_read_value(p.kv_format, p.v_descale, v[x]);
  }
}

bool RowRuns::matches(std::int64_t first, std::int64_t last, const double* o, double limit, std::int64_t zeros) const {
  first = std::max<std::int64_t>(0, first);
  last = std::min(last, n_ - 1);
  if (first > last) {
    for (int x = 0; x < d_; ++x)
      if (!(std::abs(o[x]) <= limit)) return false;
    return true;
  }
  const long double z = den_[last + 1] - den_[first] + sink_ + zeros * zero_;
  for (int x = 0; x < d_; ++x) {
    const double v = static_cast<double>((num_[(last + 1) * d_ + x] - num_[first * d_ + x]) / z);
    if (!(std::abs(o[x] - v) <= limit)) return false;
  }
  return true;
}

bool RowRuns::matches_weighted(std::int64_t first, std::int64_t last, const std::vector<SignedKey>& extra, const double* o,
                               double limit) const {
  first = std::max<std::int64_t>(0, first);
  last = std::min(last, n_ - 1);
  long double z = sink_ + (first <= last ? run_weight(first, last) : 0.0L);
  for (const SignedKey& e : extra)
    if (e.key >= 0 && e.key < n_) z += e.delta * weight(e.key);
  if (!(z > 0)) return false;
  for (int x = 0; x < d_; ++x) {
    long double num = first <= last ? run_value(first, last, x) : 0.0L;
    for (const SignedKey& e : extra)
      if (e.key >= 0 && e.key < n_) num += e.delta * weighted_value(e.key, x);
    if (!(std::abs(o[x] - static_cast<double>(num / z)) <= limit)) return false;
  }
  return true;
}

std::int64_t RowRuns::zero_keys_giving(std::int64_t first, std::int64_t last, const double* o, double limit) const {
  if (first > last || first < 0 || last >= n_) return -1;
  int x = 0;
  for (int y = 1; y < d_; ++y)
    if (std::abs(o[y]) > std::abs(o[x])) x = y;
  if (!(std::abs(o[x]) > 0)) return -1;
  const long double numerator = num_[(last + 1) * d_ + x] - num_[first * d_ + x];
  const long double k = (numerator / o[x] - (den_[last + 1] - den_[first] + sink_)) / zero_;
  if (!(k >= 0.5L && k < 1e6L)) return -1;
  const std::int64_t zeros = std::llround(static_cast<double>(k));
  return matches(first, last, o, limit, zeros) ? zeros : -1;
}

std::int64_t run_key(std::int64_t first, std::int64_t last, std::int64_t n) {
  first = std::max<std::int64_t>(0, first);
  last = std::min(last, n - 1);
  return first > last ? -1 : first * (n + 1) + last;
}

CallKind kind_of(const RowPlace& r) { return r.decode ? CallKind::decode : r.chunked ? CallKind::chunk : CallKind::prefill; }

namespace {
const char* kind_words(CallKind k) {
  return k == CallKind::decode ? "decode steps" : k == CallKind::chunk ? "chunked-prefill calls" : "prefill";
}
}  // namespace

std::string scope_words(const AttnParams& p, const std::set<CallKind>& scope) {
  std::set<CallKind> present;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; t += 1) present.insert(kind_of(place(p, b, t, 0)));
  if (scope == present) return {};
  std::vector<std::string> w;
  for (CallKind k : scope) w.push_back(kind_words(k));
  return w.size() == 1 ? w[0] : w[0] + " and " + w[1];
}

const double* row_of(const std::vector<double>& v, const Problem& pr, const RowPlace& r) {
  const AttnParams& p = pr.params;
  return &v[(static_cast<std::size_t>(pr.seq_offsets[r.b] + r.t) * p.heads_q + r.h) * p.head_size];
}

bool finite_row(const double* o, int d) {
  for (int x = 0; x < d; ++x)
    if (!std::isfinite(o[x])) return false;
  return true;
}

double max_abs_between(const double* a, const double* b, int d) {
  double m = 0;
  for (int x = 0; x < d; ++x) m = std::max(m, std::abs(a[x] - b[x]));
  return m;
}

double limit_of(const std::vector<double>& row_limit, const Problem& pr, const RowPlace& r) {
  return row_limit[static_cast<std::size_t>(pr.seq_offsets[r.b] + r.t)];
}

bool row_passes(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                const std::vector<double>& row_limit, const RowPlace& r) {
  const double* o = row_of(out, pr, r);
  const int d = pr.params.head_size;
  return finite_row(o, d) && max_abs_between(o, row_of(ref, pr, r), d) <= limit_of(row_limit, pr, r);
}

}  // namespace swa::harness::key_run_rules
