// The search for a reading that reproduces the DUT (readings_search.hpp).
#include "readings_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

namespace swa::harness {
namespace {

using golden::Reading;
using golden::RowRef;

constexpr std::size_t kFailingRows = 96, kPassingRows = 48;  // compared while searching
// Every discrete single is first compared on a few rows; those that could reproduce (within every
// screened row's limit) and the closest kScreenKept go on to the rows above. A reading that
// reproduces every row passes the screen: the screen only saves time (most readings miss the first rows).
constexpr std::size_t kScreenFailing = 12, kScreenPassing = 4, kScreenKept = 64;
constexpr std::size_t kPairsFrom = 10;                       // the best singles paired with each other
constexpr int kGrid = 33, kRefine = 30, kFineSteps = 8;  // fit(): the last kFineSteps on every compared row

// The rows a search compares, and the comparison.
class Comparison {
 public:
  Comparison(const AttnParams& p, const std::vector<double>& out, const std::vector<double>& ref,
             const std::vector<double>& row_limit, bool all_rows, std::size_t failing_rows = kFailingRows,
             std::size_t passing_rows = kPassingRows)
      : p_(p), out_(out), ref_(ref), limit_(row_limit), output_roundoff_(unit_roundoff(p.dtype)) {
    std::vector<RowRef> failing, passing;
    for (int b = 0; b < p.batch; ++b)
      for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
        for (int h = 0; h < p.heads_q; ++h) {
          const RowRef r{b, t, h};
          (difference(ref_, r) > limit(r) ? failing : passing).push_back(r);
        }
    failing_ = failing.size();
    if (all_rows) {
      rows_ = failing;
      rows_.insert(rows_.end(), passing.begin(), passing.end());
    } else {
      spread(failing, failing_rows);
      spread(passing, passing_rows);
    }
    failing_compared_ = std::min(failing.size(), all_rows ? failing.size() : failing_rows);
  }

  // The trial's statistics over the compared rows (the failing ones first).
  void evaluate(ReadingTrial& t) const {
    const std::vector<double> got = golden::read_rows(p_, t.reading, rows_);
    const int d = p_.head_size;
    t.sse = 0, t.worst_share = 0, t.worst_difference = 0, t.rows_within = 0, t.failing_within = 0;
    t.rows = static_cast<std::int64_t>(rows_.size());
    t.failing = static_cast<std::int64_t>(failing_compared_);
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      double worst = 0, worst_raw = 0;
      for (int k = 0; k < d; ++k) {
        const double a = out_[index(rows_[i]) + k], b = got[i * d + k];
        worst_raw = std::max(worst_raw, std::isfinite(a - b) ? std::abs(a - b) : (std::isnan(a) && std::isnan(b)) || a == b ? 0.0
                                                                                                    : std::numeric_limits<double>::infinity());
        double e;
        // The DUT's own noise beyond the row's limit: its output is stored in the dtype, one unit in
        // the last place (a limit taken from an exact baseline, as at W = 1, is smaller than that).
        if (std::isfinite(a) && std::isfinite(b)) e = std::max(0.0, std::abs(a - b) - 2 * output_roundoff_ * std::abs(b));
        else e = (std::isnan(a) && std::isnan(b)) || a == b ? 0.0 : std::numeric_limits<double>::infinity();
        worst = std::max(worst, e);
        t.sse += e * e;
      }
      const double share = worst / limit(rows_[i]);
      t.worst_share = std::max(t.worst_share, share);
      t.worst_difference = std::max(t.worst_difference, worst_raw);
      t.rows_within += share <= 1;
      if (i < failing_compared_) t.failing_within += share <= 1;
    }
  }

  std::size_t failing_rows() const { return failing_; }

 private:
  std::size_t index(const RowRef& r) const {
    return ((static_cast<std::size_t>(p_.seq_offsets[r.sequence] + r.token)) * p_.heads_q + r.head) * p_.head_size;
  }
  double limit(const RowRef& r) const {
    const double l = limit_[static_cast<std::size_t>(p_.seq_offsets[r.sequence] + r.token)];
    return std::isfinite(l) && l > 0 ? l : 1e-30;
  }
  double difference(const std::vector<double>& other, const RowRef& r) const {
    double worst = 0;
    for (int k = 0; k < p_.head_size; ++k) {
      const double e = std::abs(out_[index(r) + k] - other[index(r) + k]);
      worst = std::isfinite(e) ? std::max(worst, e) : std::numeric_limits<double>::infinity();
    }
    return worst;
  }
  // Up to `n` of `rows`, evenly spread (the first and the last kept).
  void spread(const std::vector<RowRef>& rows, std::size_t n) {
    if (rows.size() <= n) {
      rows_.insert(rows_.end(), rows.begin(), rows.end());
      return;
    }
    for (std::size_t i = 0; i < n; ++i) rows_.push_back(rows[i * (rows.size() - 1) / (n - 1)]);
  }

  const AttnParams& p_;
  const std::vector<double>& out_;
  const std::vector<double>& ref_;
  const std::vector<double>& limit_;
  std::vector<RowRef> rows_;
  std::size_t failing_ = 0, failing_compared_ = 0;
  double output_roundoff_ = 0;
};

Reading combined(const std::vector<ReadingSetting>& parts, golden::CallScope scope) {
  Reading r;
  for (const ReadingSetting& s : parts) s.change(r);
  r.scope = scope;
  return r;
}

ReadingTrial trial_of(std::vector<ReadingSetting> parts, const std::pair<golden::CallScope, std::string>& scope) {
  ReadingTrial t;
  t.parts = std::move(parts);
  t.scope_words = scope.second;
  t.reading = combined(t.parts, scope.first);
  return t;
}

// The continuous knob fitted on top of `base` (settings already chosen): a log-spaced grid over the
// bracket, then golden-section search around its best point. Returns the fitted setting.
// The grid and most of the refinement on `coarse` (the screen's few rows), the last steps on `c`.
ReadingSetting fit(const Comparison& coarse, const Comparison& c, const ReadingKnob& knob, const ContinuousKnob& k,
                   const std::vector<ReadingSetting>& base, const std::pair<golden::CallScope, std::string>& scope, double lo,
                   double hi, int grid, std::int64_t& evaluated) {
  auto part = [&](double x) {
    const auto set = k.set;
    return ReadingSetting{knob.fitted_name, knob.fitted_words(x, k.spec), {}, [set, x](Reading& r) { set(r, x); }, true};
  };
  const Comparison* on = &coarse;
  auto sse = [&](double log_x) {
    std::vector<ReadingSetting> parts = base;
    parts.push_back(part(std::exp(log_x)));
    ReadingTrial t = trial_of(parts, scope);
    on->evaluate(t);
    ++evaluated;
    return std::isfinite(t.sse) ? t.sse : std::numeric_limits<double>::max();
  };
  const double a = std::log(lo), b = std::log(hi);
  double best_x = a, best = std::numeric_limits<double>::max();
  const double step = (b - a) / (grid - 1);
  for (int i = 0; i < grid; ++i)
    if (const double v = sse(a + i * step); v < best) best = v, best_x = a + i * step;
  double x0 = best_x - step, x1 = best_x + step;
  const double g = (std::sqrt(5.0) - 1) / 2;
  double m0 = x1 - g * (x1 - x0), m1 = x0 + g * (x1 - x0), f0 = sse(m0), f1 = sse(m1);
  for (int i = 0; i < kRefine; ++i) {
    if (i == kRefine - kFineSteps) on = &c, f0 = sse(m0), f1 = sse(m1), best = sse(best_x);
    if (f0 < f1) x1 = m1, m1 = m0, f1 = f0, m0 = x1 - g * (x1 - x0), f0 = sse(m0);
    else x0 = m0, m0 = m1, f0 = f1, m1 = x0 + g * (x1 - x0), f1 = sse(m1);
  }
  const double fitted = f0 < f1 ? m0 : m1;
  return part(std::exp(std::min(f0, f1) <= best ? fitted : best_x));
}

}  // namespace

std::string ReadingTrial::name() const {
  std::string n;
  for (const ReadingSetting& s : parts) n += (n.empty() ? "" : "+") + s.name;
  return n;
}

std::string ReadingTrial::words() const {
  std::string w;
  for (const ReadingSetting& s : parts) w += (w.empty() ? "" : ", and ") + s.words;
  return scope_words.empty() ? w : w + ", " + scope_words;
}

ReadingTrial check_reading(const AttnParams& p, const ReadingTrial& trial, const std::vector<double>& out,
                           const std::vector<double>& ref, const std::vector<double>& row_limit) {
  ReadingTrial t = trial;
  t.boundary_rows = 0;
  const Comparison all(p, out, ref, row_limit, /*all_rows=*/true);
  all.evaluate(t);
  t.reproduces = t.rows_within == t.rows && t.failing > 0;
  // A reading that rounds an intermediate to a narrower type computes it in fp64, the DUT in fp32:
  // where the value lies on a rounding boundary the two round it apart, one unit of that type. A few
  // such rows (at most 1 in 200, and at most one unit of the type at the output's size) are allowed.
  const Reading& r = t.reading;
  const bool rounds = r.round_scores || r.round_probabilities || r.round_row_sum || r.accumulate_in_dtype || r.round_sink ||
                      r.state_round_sum || r.state_round_acc;  // (K and V are inputs: no fp32 value before their rounding)
  const std::int64_t off = t.rows - t.rows_within;
  if (!t.reproduces && rounds && t.failing > 0 && off <= std::max<std::int64_t>(2, t.rows / 200)) {
    double largest = 0;
    for (const double x : out) largest = std::isfinite(x) ? std::max(largest, std::abs(x)) : largest;
    const DType type = r.round_type == DType::fp32 ? p.dtype : r.round_type;
    if (t.worst_difference <= 2 * unit_roundoff(type) * largest) {
      t.reproduces = true;
      t.boundary_rows = off;
    }
  }
  return t;
}

std::optional<ReadingTrial> check_reading_named(const AttnParams& p, const std::string& name, const std::vector<double>& out,
                                                const std::vector<double>& ref, const std::vector<double>& row_limit) {
  std::optional<ReadingTrial> best;
  for (const ReadingKnob& knob : reading_knobs()) {
    if (!knob.settings) continue;
    for (ReadingSetting& setting : knob.settings(p)) {
      if (setting.name != name) continue;
      const ReadingTrial t = check_reading(p, trial_of({std::move(setting)}, {golden::CallScope::every_call, ""}), out, ref, row_limit);
      if (!best || (t.reproduces && !best->reproduces) || (t.reproduces == best->reproduces && t.failing_within > best->failing_within))
        best = std::move(t);
    }
  }
  return best;
}

std::vector<double> search_limits(const ReadingSearch& s, const std::vector<double>& row_limit) {
  std::vector<double> limits = row_limit;
  for (double& x : limits) x *= s.limit_share;
  return limits;
}

ReadingSearch search_readings(const AttnParams& p, const std::vector<double>& out, const std::vector<double>& ref,
                              const std::vector<double>& row_limit, const std::function<void(const std::string&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  ReadingSearch s;
  const Comparison c(p, out, ref, row_limit, /*all_rows=*/false);
  if (c.failing_rows() == 0) {
    // The outputs fail by L2 alone (many small errors: a precision fault). A reading that computes
    // them reproduces every row far inside its limit, where the golden leaves rows out: search there.
    ReadingSearch none;
    const std::vector<double> tight = search_limits({.limit_share = kL2OnlyLimitShare}, row_limit);
    if (Comparison(p, out, ref, tight, false).failing_rows() == 0) return none;
    progress("readings: no row fails by its max-abs limit; rows compared at a tenth of it, where the golden leaves some out");
    ReadingSearch narrow = search_readings(p, out, ref, tight, progress);
    narrow.limit_share = kL2OnlyLimitShare;
    return narrow;
  }
  {
    ReadingTrial spec;
    c.evaluate(spec);
    s.spec_sse = spec.sse;
    // The failing rows are within one unit of the DUT's storage of the golden itself: a reading that
    // reproduces them is told from the spec by nothing (any reading near the golden would).
    if (spec.rows_within == spec.rows) {
      s.spec_within_noise = true;
      progress("readings: not searched: the spec itself is within the DUT's storage noise of every row");
      return s;
    }
  }
  const auto scopes = scopes_of(p);
  const Comparison screen(p, out, ref, row_limit, false, kScreenFailing, kScreenPassing);
  std::vector<ReadingTrial> singles, screened;
  auto consider = [&](ReadingTrial t, std::vector<ReadingTrial>& into) {
    c.evaluate(t);
    t.order = s.evaluated++;
    into.push_back(std::move(t));
  };
  for (const ReadingKnob& knob : reading_knobs()) {
    for (const auto& scope : scopes) {
      if (knob.settings)
        for (ReadingSetting& setting : knob.settings(p)) {
          ReadingTrial t = trial_of({setting}, scope);
          screen.evaluate(t);
          t.order = s.evaluated++;
          screened.push_back(std::move(t));
        }
      if (knob.continuous)
        if (const auto k = knob.continuous(p))
          consider(trial_of({fit(screen, c, knob, *k, {}, scope, k->lo, k->hi, kGrid, s.evaluated)}, scope), singles);
    }
  }
  {
    std::vector<std::size_t> order(screened.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return screened[a].sse < screened[b].sse; });
    for (std::size_t rank = 0; rank < order.size(); ++rank) {
      ReadingTrial& t = screened[order[rank]];
      if (rank >= kScreenKept && !(t.worst_share <= 1 && t.failing_within == t.failing)) continue;
      c.evaluate(t);
      singles.push_back(std::move(t));
    }
    s.screened = static_cast<std::int64_t>(screened.size());
  }
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto by_sse = [](const ReadingTrial& a, const ReadingTrial& b) { return a.sse < b.sse; };
  std::stable_sort(singles.begin(), singles.end(), by_sse);
  auto confirm = [&](const std::vector<ReadingTrial>& trials) {
    for (const ReadingTrial& t : trials)
      if (t.worst_share <= 1 && t.failing_within == t.failing)
        if (ReadingTrial all = check_reading(p, t, out, ref, row_limit); all.reproduces) s.reproducing.push_back(all);
  };
  confirm(singles);
  // The simplest first: fewer parts, a discrete setting before a fitted value, then the table's order
  // (readings that reproduce alike differ in their sums' rounding only, which must not choose).
  auto simplest = [](const ReadingTrial& a, const ReadingTrial& b) {
    auto key = [](const ReadingTrial& t) {
      const auto fitted = std::count_if(t.parts.begin(), t.parts.end(), [](const ReadingSetting& x) { return x.fitted; });
      return std::tuple(t.parts.size(), t.boundary_rows > 0, fitted, t.order);  // an exact reproduction before a near one
    };
    return key(a) < key(b);
  };
  std::sort(s.reproducing.begin(), s.reproducing.end(), simplest);
  {
    std::ostringstream line;
    line << "readings: " << s.screened << " single readings screened on " << kScreenFailing + kScreenPassing << " rows, "
         << singles.size() << " compared on the DUT's own inputs in " << seconds() << " s; "
         << (s.reproducing.empty() ? "none reproduces" : s.reproducing.front().name() + " reproduces");
    progress(line.str());
  }
  if (s.reproducing.empty()) {
    // Pairs: the best singles with each other (same scope, different knobs), and each with every
    // continuous knob refitted on top of it.
    std::vector<ReadingTrial> pairs;
    std::vector<const ReadingTrial*> top;
    std::set<std::string> seen;
    for (const ReadingTrial& t : singles) {
      if (!(t.sse < s.spec_sse) || !seen.insert(t.words()).second) continue;
      top.push_back(&t);
      if (top.size() == kPairsFrom) break;
    }
    for (std::size_t i = 0; i < top.size(); ++i)
      for (std::size_t j = i + 1; j < top.size(); ++j)
        if (top[i]->reading.scope == top[j]->reading.scope && top[i]->parts[0].name != top[j]->parts[0].name &&
            top[i]->parts[0].change && top[j]->parts[0].change) {
          const std::pair<golden::CallScope, std::string> scope{top[i]->reading.scope, top[i]->scope_words};
          consider(trial_of({top[i]->parts[0], top[j]->parts[0]}, scope), pairs);
        }
    for (const ReadingTrial* t : top) {
      if (!t->parts[0].change || t->parts[0].fitted) continue;  // a fitted value is refitted, not stacked
      const std::pair<golden::CallScope, std::string> scope{t->reading.scope, t->scope_words};
      for (const ReadingKnob& knob : reading_knobs())
        if (knob.continuous)
          if (const auto k = knob.continuous(p))
            consider(trial_of({t->parts[0], fit(screen, c, knob, *k, {t->parts[0]}, scope, k->lo, k->hi, 17, s.evaluated)}, scope), pairs);
    }
    std::stable_sort(pairs.begin(), pairs.end(), by_sse);
    confirm(pairs);
    std::sort(s.reproducing.begin(), s.reproducing.end(), simplest);
    std::ostringstream line;
    line << "readings: " << pairs.size() << " pairs compared (" << seconds() << " s); "
         << (s.reproducing.empty() ? "none reproduces" : s.reproducing.front().name() + " reproduces");
    progress(line.str());
    singles.insert(singles.end(), pairs.begin(), pairs.end());
    std::stable_sort(singles.begin(), singles.end(), by_sse);
  }
  if (!singles.empty() && s.reproducing.empty()) s.closest = singles.front();
  s.seconds = seconds();
  return s;
}

}  // namespace swa::harness
