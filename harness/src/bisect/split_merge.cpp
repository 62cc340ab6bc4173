#include "split_merge.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "swa/dtype.hpp"

namespace swa::harness {
namespace {

using namespace key_run_rules;

constexpr std::size_t kMostSplits = 16;

// The K descale an FP8 cache's scores carry (1 without FP8).
double fp8_k_descale(const AttnParams& p) {
  return p.kv_format != KvFormat::dtype && p.k_descale > 0.f ? static_cast<double>(p.k_descale) : 1.0;
}

// One split of a row's keys: its partial softmax output (the golden's, over the split alone), its
// log-sum-exp and its largest score (absolute), and its share of the row's mass in the spec.
struct Split {
  std::int64_t first = 0, last = 0;
  double lse = 0, max = 0, share = 0;
  std::vector<double> out;
};

// The grids a kernel's splits may lie on: T keys from an origin, as a function of the row.
struct SplitGrid {
  std::string name, words;
  std::function<std::int64_t(const RowPlace&)> origin;
  bool newest_joins_last = false;  // the newest key (a decode step's own) joins the last split of the keys before it
};

const std::vector<SplitGrid>& split_grids() {
  static const std::vector<SplitGrid> g = {
      {"positions", "on multiples of T of the positions", [](const RowPlace&) { return std::int64_t{0}; }},
      {"window", "counted from the window's first key", [](const RowPlace& r) { return r.spec_first; }},
      {"newest", "counted back from the newest key", [](const RowPlace& r) { return r.spec_last + 1; }},
      {"call", "counted from its call's first row", [](const RowPlace& r) { return r.c0; }},
      {"packed", "on multiples of T of the packed batch's rows", [](const RowPlace& r) { return -r.packed; }},
      {"window_newest_in_last", "counted from the window's first key over the keys before its own, its own key in the last split",
       [](const RowPlace& r) { return r.spec_first; }, true}};
  return g;
}

std::vector<Split> splits_of(const RowRuns& runs, const RowPlace& r, std::int64_t T, const SplitGrid& grid) {
  std::vector<Split> s;
  const std::int64_t origin = grid.origin(r);
  const std::int64_t f = std::max<std::int64_t>(0, r.spec_first), l = std::min(r.spec_last, runs.keys() - 1);
  if (f > l) return s;
  // The splits' key ranges: T keys on the grid over the row's keys, or over the keys before its newest
  // with the newest joining the last.
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  const std::int64_t end = grid.newest_joins_last ? l - 1 : l;
  for (std::int64_t a = floor_to(f - origin, T) + origin; a <= end; a += T)
    if (std::max(a, f) <= std::min(a + T - 1, end)) ranges.push_back({std::max(a, f), std::min(a + T - 1, end)});
  if (grid.newest_joins_last) {
    if (ranges.empty()) ranges.push_back({l, l});
    else ranges.back().second = l;
  }
  const long double total = runs.run_weight(f, l) + runs.sink();
  for (const auto& [first, last] : ranges) {
    Split x;
    x.first = first, x.last = last;
    const long double m = runs.run_weight(x.first, x.last);
    if (!(m > 0)) return {};
    long double most = 0;
    for (std::int64_t j = x.first; j <= x.last; ++j) most = std::max(most, runs.weight(j));
    x.lse = runs.top() + static_cast<double>(std::log(m));
    x.max = runs.top() + static_cast<double>(std::log(most));
    x.share = static_cast<double>(m / total);
    x.out.resize(runs.dims());
    for (int e = 0; e < runs.dims(); ++e) x.out[e] = static_cast<double>(runs.run_value(x.first, x.last, e) / m);
    s.push_back(std::move(x));
  }
  return s;
}

double worst_over_limit(const std::vector<Split>& s, const std::vector<double>& a, const double* y, int d, double limit) {
  double worst = 0;
  for (int e = 0; e < d; ++e) {
    double v = 0;
    for (std::size_t i = 0; i < s.size(); ++i) v += a[i] * s[i].out[e];
    const double over = std::abs(y[e] - v) / limit;
    if (!(over <= worst)) worst = std::isnan(over) ? INFINITY : over;
  }
  return worst;
}

// The weights that give y from the splits' outputs, least squares (normal equations, pivoted).
std::optional<std::vector<double>> solve_weights(const std::vector<Split>& s, const double* y, int d) {
  const std::size_t n = s.size();
  std::vector<double> m(n * (n + 1), 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j)
      for (int e = 0; e < d; ++e) m[i * (n + 1) + j] += s[i].out[e] * s[j].out[e];
    for (int e = 0; e < d; ++e) m[i * (n + 1) + n] += s[i].out[e] * y[e];
  }
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t i = c + 1; i < n; ++i)
      if (std::abs(m[i * (n + 1) + c]) > std::abs(m[p * (n + 1) + c])) p = i;
    if (!(std::abs(m[p * (n + 1) + c]) > 1e-12)) return std::nullopt;
    for (std::size_t j = 0; j <= n; ++j) std::swap(m[c * (n + 1) + j], m[p * (n + 1) + j]);
    for (std::size_t i = 0; i < n; ++i) {
      if (i == c) continue;
      const double f = m[i * (n + 1) + c] / m[c * (n + 1) + c];
      for (std::size_t j = c; j <= n; ++j) m[i * (n + 1) + j] -= f * m[c * (n + 1) + j];
    }
  }
  std::vector<double> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = m[i * (n + 1) + n] / m[i * (n + 1) + i];
  return a;
}

// A measured row on the chosen grid: its splits and the weights solved for them.
struct SolvedRow {
  RowPlace r;
  std::vector<Split> splits;
  std::vector<double> weights;
  const double* y = nullptr;
  double limit = 0;
};

// A merge rule: weights e^(gamma*lse + beta*max) over their sum plus the sink's e^sigma (normalised),
// or e^(gamma*lse + beta*max + c) not divided at all; then rounded to a 16-bit type or not.
struct MergeRule {
  bool normalised = true;
  double gamma = 1, beta = 0, c = 0;
  std::map<int, double> sigma;  // per query head; absent: no sink term
  int rounding = 0;             // 0 none, 1 fp16, 2 bf16
};

std::vector<double> rule_weights(const MergeRule& m, const std::vector<Split>& s, int head) {
  std::vector<double> a(s.size());
  double top = -INFINITY;
  std::vector<double> x(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) x[i] = m.gamma * s[i].lse + m.beta * s[i].max + (m.normalised ? 0.0 : m.c);
  if (m.normalised) {
    for (double v : x) top = std::max(top, v);
    const auto sg = m.sigma.find(head);
    if (sg != m.sigma.end()) top = std::max(top, sg->second);
    long double z = sg != m.sigma.end() ? std::exp(static_cast<long double>(sg->second - top)) : 0.0L;
    for (double v : x) z += std::exp(static_cast<long double>(v - top));
    for (std::size_t i = 0; i < s.size(); ++i) a[i] = static_cast<double>(std::exp(static_cast<long double>(x[i] - top)) / z);
  } else {
    for (std::size_t i = 0; i < s.size(); ++i) a[i] = static_cast<double>(std::exp(static_cast<long double>(x[i])));
  }
  if (m.rounding)
    for (double& v : a) v = round_to(m.rounding == 1 ? DType::fp16 : DType::bf16, static_cast<float>(v));
  return a;
}

double rule_worst(const MergeRule& m, const std::vector<SolvedRow>& rows, int d) {
  double worst = 0;
  for (const SolvedRow& r : rows) worst = std::max(worst, worst_over_limit(r.splits, rule_weights(m, r.splits, r.r.h), r.y, d, r.limit));
  return worst;
}

// The rule's parameters as one vector (gamma, beta, then c or each head's sigma) and back.
std::vector<double> params_of(const MergeRule& m) {
  std::vector<double> v = {m.gamma, m.beta};
  if (!m.normalised) v.push_back(m.c);
  for (const auto& [h, s] : m.sigma) v.push_back(s);
  return v;
}
MergeRule with_params(MergeRule m, const std::vector<double>& v) {
  m.gamma = v[0], m.beta = v[1];
  std::size_t i = 2;
  if (!m.normalised) m.c = v[i++];
  for (auto& [h, s] : m.sigma) s = v[i++];
  return m;
}

// Least squares of the outputs in units of their limits, Levenberg-Marquardt with a numerical Jacobian.
MergeRule fit_rule(MergeRule m, const std::vector<SolvedRow>& rows, int d) {
  auto residuals = [&](const MergeRule& x) {
    std::vector<double> r;
    for (const SolvedRow& s : rows) {
      const std::vector<double> a = rule_weights(x, s.splits, s.r.h);
      for (int e = 0; e < d; ++e) {
        double v = 0;
        for (std::size_t i = 0; i < a.size(); ++i) v += a[i] * s.splits[i].out[e];
        const double z = (s.y[e] - v) / s.limit;
        r.push_back(std::isfinite(z) ? z : 1e30);
      }
    }
    return r;
  };
  auto cost = [](const std::vector<double>& r) {
    double c = 0;
    for (double z : r) c += z * z;
    return c;
  };
  std::vector<double> p = params_of(m);
  std::vector<double> r = residuals(m);
  double c = cost(r), lambda = 1e-3;
  for (int it = 0; it < 40; ++it) {
    const std::size_t n = p.size();
    std::vector<std::vector<double>> J(n);
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<double> q = p;
      const double h = 1e-6 * std::max(1.0, std::abs(p[k]));
      q[k] += h;
      const std::vector<double> rk = residuals(with_params(m, q));
      J[k].resize(r.size());
      for (std::size_t i = 0; i < r.size(); ++i) J[k][i] = (rk[i] - r[i]) / h;
    }
    std::vector<double> A(n * n, 0.0), g(n, 0.0);
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = 0; b < n; ++b)
        for (std::size_t i = 0; i < r.size(); ++i) A[a * n + b] += J[a][i] * J[b][i];
      for (std::size_t i = 0; i < r.size(); ++i) g[a] -= J[a][i] * r[i];
    }
    bool improved = false, moved = false;
    for (int tries = 0; tries < 8 && !moved; ++tries) {
      std::vector<double> M = A, rhs = g;
      for (std::size_t a = 0; a < n; ++a) M[a * n + a] *= 1 + lambda, M[a * n + a] += 1e-12;
      for (std::size_t col = 0; col < n; ++col)  // Gaussian elimination (M is positive definite)
        for (std::size_t row = col + 1; row < n; ++row) {
          const double f = M[row * n + col] / M[col * n + col];
          for (std::size_t j = col; j < n; ++j) M[row * n + j] -= f * M[col * n + j];
          rhs[row] -= f * rhs[col];
        }
      std::vector<double> step(n);
      for (std::size_t row = n; row-- > 0;) {
        double s = rhs[row];
        for (std::size_t j = row + 1; j < n; ++j) s -= M[row * n + j] * step[j];
        step[row] = s / M[row * n + row];
      }
      std::vector<double> q = p;
      for (std::size_t k = 0; k < n; ++k) q[k] += step[k];
      const std::vector<double> rq = residuals(with_params(m, q));
      const double cq = cost(rq);
      if (cq < c) {
        moved = true, improved = cq < c * (1 - 1e-9);
        p = q, r = rq, c = cq, lambda *= 0.3;
      } else {
        lambda *= 10;
      }
    }
    if (!improved) break;
  }
  return with_params(m, p);
}

// A number told with the named value it is near, when it is near one.
std::string told(double v, const std::vector<std::pair<double, std::string>>& named) {
  std::ostringstream o;
  o.precision(4);
  o << v;
  for (const auto& [x, words] : named)
    if (std::abs(v - x) <= 0.01 * std::max(1.0, std::abs(x))) return o.str() + " (" + words + ")";
  return o.str();
}

std::string grid_words(const SplitGrid& g, std::int64_t T) {
  std::string w = g.words;
  if (const auto at = w.find(" T "); at != std::string::npos) w.replace(at + 1, 1, std::to_string(T));
  return w;
}

std::string rule_words(const MergeRule& m, const AttnParams& p, std::int64_t T, const SplitGrid& g) {
  const double ln2 = std::log(2.0), scale = p.softcap > 0.f ? 1.0 : static_cast<double>(p.scale);
  std::ostringstream o;
  o << "its keys are split into runs of " << T << " (" << grid_words(g, T) << ") and the splits' partial softmax outputs ";
  const std::vector<std::pair<double, std::string>> gammas = {
      {0.0, "the splits' sums of exponentials left out: each weighed by e^(its max) alone"},
      {1.0, "the natural log-sum-exp"},
      {1 / ln2, "1/ln 2: a log-sum-exp in base 2 merged as natural logs"},
      {ln2, "ln 2: a natural log-sum-exp merged in base 2"}};
  std::vector<std::pair<double, std::string>> betas = {{0.0, "no extra term"}, {-m.gamma, "-gamma: the split's max left out of its LSE"}};
  if (scale != 1.0) betas.push_back({1 / scale - 1, "1/scale - 1: the max of the unscaled scores in the LSE"});
  if (const double kd = fp8_k_descale(p); kd != 1.0)
    betas.push_back({1 / kd - 1, "1/k_descale - 1: the LSE's max without the K descale the scores carry"});
  if (m.normalised) {
    o << "merged with weights e^(gamma*lse + beta*max) over their sum";
    if (!m.sigma.empty()) o << " and the sink's e^sigma";
  } else if (std::abs(m.gamma - 1) < 1e-9 && std::abs(m.beta + 1) < 1e-9 && m.c == 0) {
    o << "are each left unnormalised: the split's P.V accumulator is not divided by its sum of exponentials l = "
         "e^(lse - max) (weight e^(gamma*lse + beta*max): gamma = 1, beta = -1)";
    return o.str() + (m.rounding ? std::string("; each weight rounded to ") + (m.rounding == 1 ? "fp16" : "bf16") : "");
  } else {
    o << "summed with weights e^(gamma*lse + beta*max + c), not divided by their sum (c = " << told(m.c, {{0.0, "none"}}) << ")";
  }
  o << ": gamma = " << told(m.gamma, gammas) << ", beta = " << told(m.beta, betas);
  if (!m.sigma.empty() && p.sinks) {
    auto every = [&](double factor) {
      return std::all_of(m.sigma.begin(), m.sigma.end(), [&](const auto& hs) {
        return std::abs(hs.second - factor * p.sinks[hs.first]) <= 1e-9 * std::max(1.0, std::abs(hs.second));
      });
    };
    if (every(1.0)) o << ", sigma = each head's sink logit";
    else if (every(m.gamma)) o << ", sigma = gamma x each head's sink logit";
    else {
      o << ", sigma";
      int shown = 0;
      for (const auto& [h, s] : m.sigma) {
        if (shown++ == 4) {
          o << " ...";
          break;
        }
        const double sink = p.sinks[h];
        o << " (head " << h << ") = " << told(s, {{sink, "the sink logit"}, {m.gamma * sink, "gamma x the sink logit"}});
      }
    }
  } else if (m.normalised && p.sinks) {
    o << ", the sink left out of the merge";
  }
  if (m.rounding) o << "; each weight rounded to " << (m.rounding == 1 ? "fp16" : "bf16");
  return o.str();
}

// The rules to try from: the spec's and the common misreadings, each then fitted.
std::vector<MergeRule> starts(const AttnParams& p, const std::vector<SolvedRow>& rows) {
  std::map<int, double> sigma;  // every head's, so that the rule is computed on every row
  if (p.sinks)
    for (int h = 0; h < p.heads_q; ++h) sigma[h] = p.sinks[h];
  (void)rows;
  const double ln2 = std::log(2.0), scale = p.softcap > 0.f ? 1.0 : static_cast<double>(p.scale);
  std::vector<MergeRule> v;
  const double kd = fp8_k_descale(p);
  for (const double gamma : {1.0, 1 / ln2, ln2})
    for (const double beta : std::set<double>{0.0, -gamma, 1 / scale - 1, 1 / kd - 1}) {  // a set: 1/1 - 1 is 0 again
      v.push_back({true, gamma, beta, 0, sigma, 0});
      if (p.sinks) v.push_back({true, gamma, beta, 0, {}, 0});
      v.push_back({false, gamma, beta, 0, {}, 0});
    }
  return v;
}

bool is_spec(const MergeRule& m, const AttnParams& p) {
  if (!m.normalised || m.rounding || std::abs(m.gamma - 1) > 1e-3 || std::abs(m.beta) > 1e-3) return false;
  if (!p.sinks) return m.sigma.empty();
  for (const auto& [h, s] : m.sigma)
    if (std::abs(s - p.sinks[h]) > 1e-3) return false;
  return !m.sigma.empty();
}

// The named value a parameter is near, or itself.
double snapped(double v, const std::vector<double>& named) {
  for (double x : named)
    if (std::abs(v - x) <= 0.01 * std::max(1.0, std::abs(x))) return x;
  return v;
}

// A row's coarsest split on multiples of T from the same origin (a planner may pick the split size
// per call: 48 keys in one call, 64 in the next) whose solved weights still give the row; nullopt
// when even T does not.
std::optional<std::pair<std::int64_t, std::vector<Split>>> coarsest_splits(const RowRuns& runs, const RowPlace& r, std::int64_t T,
                                                                           const SplitGrid& grid,
                                                                           const std::function<bool(const std::vector<Split>&)>& gives) {
  const std::int64_t keys = r.spec_last - r.spec_first + 1;
  for (std::int64_t k = std::max<std::int64_t>(1, (keys + T - 1) / T + 1); k >= 1; --k) {
    std::vector<Split> s = splits_of(runs, r, k * T, grid);
    if (!s.empty() && gives(s)) return std::pair(k * T, std::move(s));
  }
  return std::nullopt;
}

// The parameters of a rule that are at none of their named values (the spec's, the common misreadings').
int unnamed(const MergeRule& m, const AttnParams& p) {
  const double ln2 = std::log(2.0), scale = p.softcap > 0.f ? 1.0 : static_cast<double>(p.scale);
  auto at = [](double v, const std::vector<double>& named) {
    return std::any_of(named.begin(), named.end(), [v](double x) { return std::abs(v - x) <= 1e-9 * std::max(1.0, std::abs(x)); });
  };
  int n = !at(m.gamma, {0.0, 1.0, 1 / ln2, ln2}) + !at(m.beta, {0.0, -m.gamma, 1 / scale - 1, 1 / fp8_k_descale(p) - 1});
  if (!m.normalised) n += !at(m.c, {0.0});
  for (const auto& [h, s] : m.sigma) n += !at(s, {p.sinks[h], m.gamma * p.sinks[h]});
  return n;
}

// The merge rules with shared parameters that give every solved row, simplest first (fewest
// parameters off their named values, no rounding, then the closest): each start as it is, fitted to
// the outputs, and the fit with its numbers snapped to named values near them.
std::vector<MergeRule> fit_merge_rules(const AttnParams& p, const std::vector<SolvedRow>& rows, int d) {
  std::vector<std::pair<std::tuple<int, int, double>, MergeRule>> found;
  const double ln2 = std::log(2.0), scale = p.softcap > 0.f ? 1.0 : static_cast<double>(p.scale);
  const bool one_split_each = std::all_of(rows.begin(), rows.end(), [](const SolvedRow& r) { return r.splits.size() == 1; });
  for (const MergeRule& m : starts(p, rows)) {
    const MergeRule f = fit_rule(m, rows, d);
    MergeRule named = f;
    named.gamma = snapped(f.gamma, {0.0, 1.0, 1 / ln2, ln2});
    named.beta = snapped(f.beta, {0.0, -named.gamma, 1 / scale - 1, 1 / fp8_k_descale(p) - 1});
    named.c = snapped(f.c, {0.0});
    for (auto& [h, s] : named.sigma) s = snapped(s, {p.sinks[h], named.gamma * p.sinks[h]});
    for (const MergeRule& y : {m, named, f})
      for (const int rounding : {0, 1, 2}) {
        MergeRule x = y;
        x.rounding = rounding;
        if (is_spec(x, p)) continue;
        // Weights from no split statistic are a scale, not a merge (weights that do not sum to one).
        if (std::abs(x.gamma) < 0.05 && std::abs(x.beta) < 0.05) continue;
        const int off = unnamed(x, p);
        if (one_split_each && off > 0) continue;  // rows of one split tell a named rule only
        const double w = rule_worst(x, rows, d);
        if (w <= 1) found.push_back({{off, rounding > 0, w}, x});
      }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<MergeRule> rules;
  for (const auto& [rank, x] : found) {
    const bool seen = std::any_of(rules.begin(), rules.end(), [&](const MergeRule& r) {
      return r.normalised == x.normalised && r.rounding == x.rounding && r.gamma == x.gamma && r.beta == x.beta && r.c == x.c &&
             r.sigma == x.sigma;
    });
    if (!seen) rules.push_back(x);
    if (rules.size() == 3) break;
  }
  return rules;
}

// The rule computed on every row of the call kinds: rows over their limit with the rule on every row,
// on the rows of one split only (the others as the spec), on the rows of several only.
struct Held {
  std::int64_t checked = 0, over_all = 0, over_one = 0, over_several = 0;
  std::set<std::int64_t> split_sizes;  // the coarsest multiple of T that gives each failing row
};

Held hold_rule(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
               const std::vector<double>& row_limit, const std::set<CallKind>& scope, const MergeRule& rule, std::int64_t T,
               const SplitGrid& grid) {
  const AttnParams& p = pr.params;
  const int d = p.head_size;
  Held held;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        RowPlace r = place(p, b, t, h);
        if (!scope.count(kind_of(r))) continue;
        r.spec_first = spec_first_at(p, r.t), r.spec_last = spec_last_at(p, r, r.t);
        if (r.spec_first > r.spec_last) continue;
        ++held.checked;
        const RowRuns rr(pr, r);
        const std::vector<Split> s = splits_of(rr, r, T, grid);
        const double* y = row_of(out, pr, r);
        const double limit = limit_of(row_limit, pr, r);
        auto gives = [&](const std::vector<Split>& x) { return worst_over_limit(x, rule_weights(rule, x, h), y, d, limit) <= 1; };
        const bool finite = finite_row(y, d);
        const bool given = !s.empty() && finite && gives(s);
        const bool passes = row_passes(pr, out, ref, row_limit, r), one = s.size() == 1;
        const auto coarser = finite ? coarsest_splits(rr, r, T, grid, gives) : std::nullopt;
        if (coarser && !passes) held.split_sizes.insert(coarser->first);
        held.over_all += !coarser;
        held.over_one += one ? !given : !passes;
        held.over_several += one ? !passes : !given;
      }
  return held;
}

}  // namespace

std::optional<KeyRunFit> fit_split_merge(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                         const std::vector<double>& row_limit, const std::vector<RowPlace>& measured,
                                         const std::set<CallKind>& scope, KeyRunFit fit) {
  const AttnParams& p = pr.params;
  const int d = p.head_size;
  // A split size, a grid, each row's split weights and a merge rule's two parameters, fitted on one or
  // two rows, fit by construction (a precision fault's rows were once "reproduced" so): too few rows
  // to tell a merge from anything else.
  constexpr std::size_t kFewestRows = 3;
  if (measured.size() < kFewestRows) return std::nullopt;
  constexpr std::size_t kMeasured = 32;
  std::vector<RowPlace> sample;
  for (std::size_t i = 0; i < std::min(kMeasured, measured.size()); ++i)
    sample.push_back(measured[i * measured.size() / std::min(kMeasured, measured.size())]);
  std::vector<RowRuns> runs;
  std::int64_t widest = 1;
  for (const RowPlace& r : sample) {
    runs.emplace_back(pr, r);
    if (!finite_row(row_of(out, pr, r), d)) return std::nullopt;
    widest = std::max(widest, r.spec_last - r.spec_first + 1);
  }
  const std::size_t most = std::min<std::size_t>(kMostSplits, std::max(1, d / 4));
  // Every grid on which each sampled row is a merge of its splits, fewest splits first.
  struct Choice {
    std::size_t count;
    std::int64_t T;
    std::size_t g;
  };
  std::vector<Choice> choices;
  for (std::int64_t T = std::max<std::int64_t>(2, widest / static_cast<std::int64_t>(most)); T <= widest; ++T)
    for (std::size_t g = 0; g < split_grids().size(); ++g) {
      std::size_t count = 0;
      bool all = true;
      for (std::size_t k = 0; k < sample.size() && all; ++k) {
        const RowPlace& r = sample[k];
        const std::vector<Split> s = splits_of(runs[k], r, T, split_grids()[g]);
        if (s.empty() || s.size() > most) all = false;
        else if (const auto a = solve_weights(s, row_of(out, pr, r), d);
                 !a || !(worst_over_limit(s, *a, row_of(out, pr, r), d, limit_of(row_limit, pr, r)) <= 1))
          all = false;
        count += s.size();
      }
      if (all) choices.push_back({count, T, g});
    }
  if (choices.empty()) return std::nullopt;
  std::stable_sort(choices.begin(), choices.end(), [](const Choice& a, const Choice& b) {
    return std::tuple(a.count, -a.T, a.g) < std::tuple(b.count, -b.T, b.g);
  });
  fit.kind = KeyRunKind::splits;
  fit.scope = scope_words(p, scope);
  fit.measured = fit.explained = static_cast<std::int64_t>(sample.size());
  std::map<std::string, std::vector<MergeRule>> rules;  // by the sample's partition: the same rows, the same rule
  constexpr std::size_t kGridsHeld = 12;
  bool one_split_rows = false;
  for (std::size_t c = 0; c < choices.size() && c < kGridsHeld; ++c) {
    const std::int64_t T = choices[c].T;
    const SplitGrid& grid = split_grids()[choices[c].g];
    std::vector<SolvedRow> rows;
    std::string partition;
    for (std::size_t k = 0; k < sample.size(); ++k) {
      const RowPlace& r = sample[k];
      SolvedRow s{r, {}, {}, row_of(out, pr, r), limit_of(row_limit, pr, r)};
      s.splits = coarsest_splits(runs[k], r, T, grid, [&](const std::vector<Split>& x) {
                   if (x.size() > most) return false;
                   const auto a = solve_weights(x, s.y, d);
                   return a && worst_over_limit(x, *a, s.y, d, s.limit) <= 1;
                 })->second;
      s.weights = *solve_weights(s.splits, s.y, d);
      for (const Split& x : s.splits) partition += std::to_string(x.first) + ",";
      partition += ";";
      rows.push_back(std::move(s));
    }
    if (c == 0) {  // the finest account of the rows, told when no rule holds
      one_split_rows = std::all_of(rows.begin(), rows.end(), [](const SolvedRow& r) { return r.splits.size() == 1; });
      for (std::size_t i = 0; i < rows.size() && fit.examples.size() < 3; ++i) {
        const SolvedRow& s = rows[i];
        std::ostringstream o;
        o.precision(4);
        o << "token " << s.r.t << " of sequence " << s.r.b << " (head " << s.r.h << "): splits";
        for (std::size_t j = 0; j < s.splits.size(); ++j)
          o << (j ? "," : "") << " [" << s.splits[j].first << ", " << s.splits[j].last << "] weight " << s.weights[j] << " (spec "
            << s.splits[j].share << ")";
        fit.examples.push_back(o.str());
      }
      std::int64_t dropped = 0, splits = 0;
      for (const SolvedRow& s : rows)
        for (std::size_t j = 0; j < s.splits.size(); ++j) ++splits, dropped += std::abs(s.weights[j]) < 1e-3 * s.splits[j].share;
      fit.pattern = std::to_string(splits) + " splits over the " + std::to_string(rows.size()) + " rows, " + std::to_string(dropped) +
                    " of them weighed 0";
      fit.unruled_name = fit.name = dropped > 0 ? "split_left_out_of_merge" : "split_merge_weights_differ";
      fit.words = "its keys are split into runs of " + std::to_string(T) + " (" + grid_words(grid, T) +
                  ") whose partial softmax outputs are merged with other weights than their shares of the row's mass";
    }
    auto cached = rules.find(partition);
    if (cached == rules.end()) cached = rules.emplace(partition, fit_merge_rules(p, rows, d)).first;
    bool failing_one = false, failing_several = false;
    for (const SolvedRow& s : rows) (s.splits.size() == 1 ? failing_one : failing_several) = true;
    for (const MergeRule& rule : cached->second) {
      const Held held = hold_rule(pr, out, ref, row_limit, scope, rule, T, grid);
      std::string where;
      bool reproduced = held.over_all == 0;
      if (!reproduced && failing_one && !failing_several && held.over_one == 0)
        reproduced = true, where = ", in rows of one split (the others merged right)";
      if (!reproduced && failing_several && !failing_one && held.over_several == 0)
        reproduced = true, where = ", in rows of several splits (rows of one right)";
      if (reproduced) {
        fit.reproduced = true;
        fit.checked = held.checked;
        fit.words = rule_words(rule, p, T, grid) + where;
        if (held.split_sizes.size() > 1 || (held.split_sizes.size() == 1 && *held.split_sizes.begin() != T)) {
          std::string sizes;
          for (std::int64_t x : held.split_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(x);
          fit.words += " (the split size a multiple of " + std::to_string(T) + " chosen per call: " + sizes + " on the failing rows)";
        }
        fit.name = rule.normalised ? "split_merge_weights" : "split_outputs_not_normalised";
        fit.reproducing.push_back({fit.name, fit.words});  // held to the look-alike probes by name
        return fit;
      }
      if (fit.refuted.empty())
        fit.refuted = "The merge rule fitted to the measured rows (" + rule_words(rule, p, T, grid) + ") leaves " +
                      std::to_string(held.over_all) + " of the " + std::to_string(held.checked) +
                      " rows of the call kinds over their limit.";
    }
  }
  // Rows of one split each and no rule: a scale of the row, not a merge; another method tells it.
  if (!fit.reproduced && one_split_rows) return std::nullopt;
  return fit;
}

}  // namespace swa::harness
