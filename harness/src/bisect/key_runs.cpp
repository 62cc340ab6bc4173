#include "key_runs.hpp"

#include "block_plan_rules.hpp"
#include "key_run_rules.hpp"
#include "key_weights.hpp"
#include "row_runs.hpp"
#include "split_merge.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <unordered_set>

namespace swa::harness {
namespace {

using namespace key_run_rules;

// A measured row: the runs that give its output, keyed by run_key (capped: a row many runs give is
// told by none of them).
struct MeasuredRow {
  RowPlace at;
  std::unordered_set<std::int64_t> runs;
  std::set<std::int64_t> firsts, lasts;
  bool informative = true;
};

constexpr std::size_t kRunsPerRowCap = 4096;

MeasuredRow measure_row(const RowRuns& runs, const RowPlace& r, const double* o, double limit) {
  MeasuredRow m{r, {}, {}, {}, true};
  const std::int64_t n = runs.keys();
  if (runs.matches(1, 0, o, limit)) m.runs.insert(-1);
  for (std::int64_t a = 0; a < n && m.informative; ++a)
    for (std::int64_t b = a; b < n; ++b)
      if (runs.matches(a, b, o, limit)) {
        m.runs.insert(run_key(a, b, n));
        m.firsts.insert(a), m.lasts.insert(b);
        if (m.runs.size() > kRunsPerRowCap) {
          m.informative = false;
          break;
        }
      }
  return m;
}

// The run nearest the spec's that gives a row; nullopt when that is the run of no key.
std::optional<std::pair<std::int64_t, std::int64_t>> nearest_run(const MeasuredRow& m) {
  std::optional<std::pair<std::int64_t, std::int64_t>> best;
  std::int64_t best_distance = 0;
  for (std::int64_t key : m.runs) {
    if (key < 0) continue;
    const std::int64_t n = m.at.last_key + 1, a = key / (n + 1), z = key % (n + 1);
    const std::int64_t distance = std::abs(a - m.at.spec_first) + std::abs(z - m.at.spec_last);
    if (!best || distance < best_distance) best = std::pair(a, z), best_distance = distance;
  }
  return best;
}

// How the measured runs differ from the window's, told as one pattern when they share one: which
// end moved, by how much, and the largest tile the moved edge always lands on.
std::string run_deviations(const std::vector<MeasuredRow>& rows) {
  struct Side {
    const char* words;
    std::int64_t rows = 0, most = 0;
    std::vector<std::int64_t> edges;  // the position the edge lands on, per row
  };
  Side newest_dropped{"its newest keys dropped"}, oldest_dropped{"its oldest keys dropped"},
      older_added{"older keys added"}, later_added{"later keys added"};
  std::int64_t none = 0, told = 0;
  for (const MeasuredRow& m : rows) {
    if (!m.informative) continue;
    ++told;
    const auto run = nearest_run(m);
    if (!run) {
      ++none;
      continue;
    }
    auto note = [](Side& s, std::int64_t count, std::int64_t edge) {
      if (count <= 0) return;
      ++s.rows, s.most = std::max(s.most, count), s.edges.push_back(edge);
    };
    note(newest_dropped, m.at.spec_last - run->second, run->second + 1);
    note(oldest_dropped, run->first - m.at.spec_first, run->first);
    note(older_added, m.at.spec_first - run->first, run->first);
    note(later_added, run->second - m.at.spec_last, run->second + 1);
  }
  if (told == 0) return {};
  std::vector<std::string> parts;
  if (none > 0) parts.push_back(std::to_string(none) + " of the " + std::to_string(told) + " rows attend no key at all");
  for (const Side* s : {&newest_dropped, &oldest_dropped, &older_added, &later_added}) {
    if (s->rows == 0) continue;
    std::string part = std::to_string(s->rows) + " of the " + std::to_string(told) + " rows have " + s->words + " (up to " +
                       std::to_string(s->most) + ")";
    for (int T : {256, 128, 64, 48, 40, 32, 16, 8})
      if (std::all_of(s->edges.begin(), s->edges.end(), [T](std::int64_t e) { return e % T == 0; })) {
        part += ", the run's edge there always on a multiple of " + std::to_string(T);
        break;
      }
    parts.push_back(part);
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// The tiles the measured runs' moved edges lie on: for each grid origin (positions, the window's first
// key, the call's first row, the packed batch), the greatest common divisor of the moved edges'
// distances from it, added to `tiles` when it is a plausible tile (16 .. 4096).
std::vector<int> tiles_of_moved_edges(const std::vector<MeasuredRow>& rows, const std::vector<int>& tiles) {
  std::set<int> all(tiles.begin(), tiles.end());
  const std::vector<std::function<std::int64_t(const RowPlace&)>> origins = {
      [](const RowPlace&) { return std::int64_t{0}; }, [](const RowPlace& r) { return r.spec_first; },
      [](const RowPlace& r) { return r.c0; }, [](const RowPlace& r) { return -r.packed; }};
  for (const auto& origin : origins) {
    std::int64_t g = 0, moved = 0;
    for (const MeasuredRow& m : rows) {
      const auto run = m.informative ? nearest_run(m) : std::nullopt;
      if (!run) continue;
      if (run->second != m.at.spec_last) g = std::gcd(g, run->second + 1 - origin(m.at)), ++moved;
      if (run->first != m.at.spec_first) g = std::gcd(g, run->first - origin(m.at)), ++moved;
    }
    if (moved >= 2 && g >= 16 && g <= 4096) all.insert(static_cast<int>(g));
  }
  return {all.begin(), all.end()};
}

// A pair of edge rules, by its index in each list.
struct Rule {
  std::size_t first = 0, last = 0;
  int complexity = 0;
};

// Every pair of edge rules each measured row allows, simplest first (each edge pre-filtered alone).
std::vector<Rule> rules_fitting(const std::vector<MeasuredRow>& rows, const std::vector<Edge>& firsts,
                                const std::vector<Edge>& lasts) {
  auto edge_fits = [&](const Edge& e, bool first_edge) {
    for (const MeasuredRow& m : rows) {
      if (!m.informative) continue;
      const std::int64_t x = e.at(m.at);
      const auto& set = first_edge ? m.firsts : m.lasts;
      if (!set.count(x) && !m.runs.count(-1)) return false;
    }
    return true;
  };
  std::vector<std::size_t> fs, ls;
  for (std::size_t i = 0; i < firsts.size(); ++i)
    if (edge_fits(firsts[i], true)) fs.push_back(i);
  for (std::size_t i = 0; i < lasts.size(); ++i)
    if (edge_fits(lasts[i], false)) ls.push_back(i);
  std::vector<Rule> found;
  for (std::size_t f : fs)
    for (std::size_t l : ls) {
      if (f == 0 && l == 0) continue;
      bool all = true;
      for (const MeasuredRow& m : rows)
        if (m.informative && !m.runs.count(run_key(firsts[f].at(m.at), lasts[l].at(m.at), m.at.last_key + 1))) {
          all = false;
          break;
        }
      if (all) found.push_back({f, l, firsts[f].complexity + lasts[l].complexity});
    }
  std::stable_sort(found.begin(), found.end(), [](const Rule& a, const Rule& b) { return a.complexity < b.complexity; });
  return found;
}

// The block plans (block_plan_rules.hpp) that give every measured row a run it is measured to attend,
// each as its own pair of edges, after the rules of the edges: a plan decides both edges at once.
void add_block_plans(const AttnParams& p, const std::vector<MeasuredRow>& rows, const std::vector<int>& tiles,
                     std::vector<Edge>& firsts, std::vector<Edge>& lasts, std::vector<Rule>& fitting) {
  // Rows exactly 0 accept every plan that leaves them no key: then far more fit, and the rows that
  // pass must tell them apart (check_rules).
  const bool only_empty = std::all_of(rows.begin(), rows.end(), [](const MeasuredRow& m) { return !m.informative || m.runs.count(-1); });
  const std::size_t kPlans = only_empty ? 2048 : 512;
  std::size_t added = 0;
  for (const BlockPlan& plan : block_plans(p, tiles)) {
    const bool fits = std::all_of(rows.begin(), rows.end(), [&](const MeasuredRow& m) {
      if (!m.informative) return true;
      const auto [a, z] = plan_run(p, plan, m.at);
      return m.runs.count(run_key(a, z, m.at.last_key + 1)) > 0;
    });
    if (!fits) continue;
    const std::string name = plan_name(plan), words = plan_words(p, plan);
    firsts.push_back({name, words, 5, [&p, plan](const RowPlace& r) { return plan_run(p, plan, r).first; }});
    lasts.push_back({name, words, 5, [&p, plan](const RowPlace& r) { return plan_run(p, plan, r).second; }});
    fitting.push_back({firsts.size() - 1, lasts.size() - 1, 5});
    if (++added == kPlans) break;
  }
}

// Every row of the call kinds in `scope` computed with each rule: per rule, per row, whether the rule
// gives the row (a row the rule gives its spec run is given when the DUT's row passes), and per row
// whether it passes. A conditional rule is then counted without computing anything again.
struct RuleChecks {
  std::vector<RowPlace> rows;                // with spec_first / spec_last set
  std::vector<char> passes;                  // [row]
  std::vector<std::vector<char>> given;      // [rule][row]
  std::int64_t over(std::size_t rule) const { return std::count(given[rule].begin(), given[rule].end(), 0); }
  // The rule on the rows the condition picks, the spec on the others.
  std::int64_t over(std::size_t rule, const Condition& c) const {
    std::int64_t n = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) n += !(c.holds(rows[i]) ? given[rule][i] : passes[i]);
    return n;
  }
};

RuleChecks check_rules(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                       const std::vector<double>& row_limit, const std::set<CallKind>& scope, const std::vector<Rule>& rules,
                       const std::vector<Edge>& firsts, const std::vector<Edge>& lasts) {
  const AttnParams& p = pr.params;
  RuleChecks c;
  c.given.assign(rules.size(), {});
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        RowPlace r = place(p, b, t, h);
        if (!scope.count(kind_of(r))) continue;
        r.spec_first = firsts[0].at(r), r.spec_last = lasts[0].at(r);
        const double* o = row_of(out, pr, r);
        const double limit = limit_of(row_limit, pr, r);
        const bool finite = finite_row(o, p.head_size);
        const bool passes = row_passes(pr, out, ref, row_limit, r);
        const std::int64_t spec = run_key(r.spec_first, r.spec_last, r.last_key + 1);
        std::optional<RowRuns> runs;
        for (std::size_t i = 0; i < rules.size(); ++i) {
          const std::int64_t a = firsts[rules[i].first].at(r), z = lasts[rules[i].last].at(r);
          bool given = passes;
          if (run_key(a, z, r.last_key + 1) != spec) {
            if (finite && !runs) runs.emplace(pr, r);
            given = finite && runs->matches(a, z, o, limit);
          }
          c.given[i].push_back(given);
        }
        c.rows.push_back(r);
        c.passes.push_back(passes);
      }
  return c;
}

// The rows measured: every failing finite row, or an even sample of them in packed order.
std::vector<RowPlace> failing_places(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                     const std::vector<double>& row_limit, std::int64_t& failing) {
  const AttnParams& p = pr.params;
  std::vector<RowPlace> all;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        const RowPlace r = place(p, b, t, h);
        if (finite_row(row_of(out, pr, r), p.head_size) && !row_passes(pr, out, ref, row_limit, r)) all.push_back(r);
      }
  failing = static_cast<std::int64_t>(all.size());
  constexpr std::size_t kMeasured = 192;
  if (all.size() <= kMeasured) return all;
  std::vector<RowPlace> sample;
  for (std::size_t i = 0; i < kMeasured; ++i) sample.push_back(all[i * all.size() / kMeasured]);
  return sample;
}

// Zero keys: a row the spec's run gives with k keys of score 0 and value 0 added to its denominator
// (slots never written, zero-filled, read as keys). k is fitted as a rule of the row's position and
// held to every row of the failing rows' call kinds.
std::optional<KeyRunFit> fit_zero_keys(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                       const std::vector<double>& row_limit, const std::set<CallKind>& scope,
                                       const std::vector<std::pair<RowPlace, std::int64_t>>& measured, KeyRunFit fit,
                                       std::chrono::steady_clock::time_point t0) {
  const AttnParams& p = pr.params;
  struct ZeroRule {
    std::string words;
    std::function<std::int64_t(const RowPlace&)> zeros;
  };
  std::vector<ZeroRule> rules;
  // Every row without its newest key and with one zero key: the key it reads there was never stored.
  const bool newest_zeroed = std::all_of(measured.begin(), measured.end(), [](const auto& m) { return m.second == -3; });
  if (std::any_of(measured.begin(), measured.end(), [](const auto& m) { return m.second <= -2; }) && !newest_zeroed)
    return std::nullopt;
  if (newest_zeroed)
    rules.push_back({"its newest key (its own) is read as a key of score 0 and value 0: the K/V it reads there were never "
                     "stored (a zeroed slot)",
                     [](const RowPlace&) { return std::int64_t{-3}; }});
  if (p.band.left >= 0 && !newest_zeroed)
    rules.push_back({"the window's first position (t - window_left) is not clamped at 0: its positions below 0 are read as "
                     "zero keys (score 0, value 0), window_left - t of them",
                     [&p](const RowPlace& r) { return std::max<std::int64_t>(0, p.band.left - r.t); }});
  for (int T : tiles_for(p, {})) {
    if (newest_zeroed) break;
    rules.push_back({"the row's keys are padded to a whole tile of " + std::to_string(T) + " with zero keys (score 0, value 0)",
                     [T](const RowPlace& r) { const std::int64_t c = r.spec_last - r.spec_first + 1; return ceil_to(c, T) - c; }});
    if (p.band.right > 0)
      rules.push_back({"the keys are padded to a whole " + std::to_string(T) + "-key tile, and the window's positions past the "
                       "last key, up to that tile's end, are read as zero keys (score 0, value 0)",
                       [&p, T](const RowPlace& r) {
                         const std::int64_t reach = std::min(r.t + p.band.right, ceil_to(r.last_key + 1, T) - 1);
                         return std::max<std::int64_t>(0, reach - r.last_key);
                       }});
    rules.push_back({"the keys up to the end of the last " + std::to_string(T) + "-key tile are read, past the last key as zero keys",
                     [T](const RowPlace& r) { return ceil_to(r.spec_last + 1, T) - (r.spec_last + 1); }});
  }
  if (!newest_zeroed && std::all_of(measured.begin(), measured.end(), [&](const auto& m) { return m.second == measured[0].second; })) {
    const std::int64_t c = measured[0].second;
    rules.push_back({std::to_string(c) + " zero key(s) (score 0, value 0) in every failing row's denominator",
                     [c](const RowPlace&) { return c; }});
  }
  fit.measured = fit.explained = static_cast<std::int64_t>(measured.size());
  fit.scope = scope_words(p, scope);
  for (std::size_t i = 0; i < measured.size() && i < 3; ++i)
    fit.examples.push_back("token " + std::to_string(measured[i].first.t) + " of sequence " + std::to_string(measured[i].first.b) +
                           " (head " + std::to_string(measured[i].first.h) + "): " +
                           (measured[i].second == -3 ? std::string("the spec's keys but its newest, and one zero key")
                                                     : "the spec's keys and " + std::to_string(measured[i].second) + " zero key(s)"));
  for (const ZeroRule& rule : rules) {
    if (!std::all_of(measured.begin(), measured.end(), [&](const auto& m) {
          RowPlace r = m.first;
          return rule.zeros(r) == m.second;
        }))
      continue;
    bool holds = true;
    fit.checked = 0;
    for (int b = 0; b < p.batch && holds; ++b)
      for (std::int64_t t = 0; t < p.seq_lens[b] && holds; ++t)
        for (int h = 0; h < p.heads_q && holds; ++h) {
          RowPlace r = place(p, b, t, h);
          if (!scope.count(kind_of(r))) continue;
          ++fit.checked;
          r.spec_first = spec_first_at(p, r.t), r.spec_last = spec_last_at(p, r, r.t);
          const double* o = row_of(out, pr, r);
          const double limit = limit_of(row_limit, pr, r);
          const std::int64_t k = rule.zeros(r);
          holds = finite_row(o, p.head_size) &&
                  (k == 0 ? row_passes(pr, out, ref, row_limit, r)
                          : k == -3 ? RowRuns(pr, r).matches(r.spec_first, r.spec_last - 1, o, limit, 1)
                                    : RowRuns(pr, r).matches(r.spec_first, r.spec_last, o, limit, k));
        }
    if (!holds) continue;
    fit.reproduced = true;
    fit.kind = KeyRunKind::zero_keys;
    fit.name = "zero_keys_attended";
    fit.words = rule.words;
    break;
  }
  if (!fit.reproduced) {
    fit.kind = KeyRunKind::zero_keys;
    fit.unruled_name = fit.name = "zero_keys_attended";
    fit.words = "each failing row is the spec's softmax with zero keys (score 0, value 0) added to its denominator; "
                "no rule of the row's position gives their number";
  }
  fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return fit;
}

}  // namespace

std::optional<KeyRunFit> fit_key_runs(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                      const std::vector<double>& row_limit, const KeyRunTiles& tiles) {
  const auto t0 = std::chrono::steady_clock::now();
  const AttnParams& p = pr.params;
  if (pr.q.empty() || pr.k.empty() || pr.v.empty()) return std::nullopt;  // no float inputs (a cache-entry problem)
  KeyRunFit fit;
  const std::vector<RowPlace> places = failing_places(pr, out, ref, row_limit, fit.failing);
  if (places.empty()) return std::nullopt;
  std::vector<int> tile_sizes = tiles_for(p, tiles);
  std::vector<Edge> firsts = first_key_rules(p, tile_sizes), lasts = last_key_rules(p, tile_sizes);
  add_tiled_anchor_rules(p, tile_sizes, firsts, lasts);
  std::vector<MeasuredRow> rows;
  std::vector<std::pair<RowPlace, std::int64_t>> zero_rows;  // rows the spec's run gives with this many zero keys
  std::vector<RowPlace> weighed;  // rows no run and no zero keys give
  std::set<CallKind> scope;
  for (RowPlace r : places) {
    r.spec_first = firsts[0].at(r), r.spec_last = lasts[0].at(r);
    // The spec's run must give the golden's row: else this model of the softmax is not the golden's here.
    const RowRuns check(pr, r);
    const double* golden_row = row_of(ref, pr, r);
    double size = 0;
    for (int x = 0; x < p.head_size; ++x) size = std::max(size, std::abs(golden_row[x]));
    if (!check.matches(r.spec_first, r.spec_last, golden_row, 1e-9 * (1 + size))) return std::nullopt;
    const double limit = limit_of(row_limit, pr, r);
    MeasuredRow m = measure_row(check, r, row_of(out, pr, r), limit);
    scope.insert(kind_of(r));
    if (m.runs.empty()) {  // the spec's run with zero keys added, or not a question of which keys
      // The run with zero keys, or without its newest key and with zero keys (a key never stored, read as 0).
      std::int64_t zeros = check.zero_keys_giving(r.spec_first, r.spec_last, row_of(out, pr, r), limit);
      if (zeros < 0 && r.spec_last > r.spec_first) {
        zeros = check.zero_keys_giving(r.spec_first, r.spec_last - 1, row_of(out, pr, r), limit);
        if (zeros >= 0) zeros = -2 - zeros;  // marks the newest key dropped
      }
      if (zeros == -1) {
        weighed.push_back(r);  // perhaps its keys counted otherwise
        continue;
      }
      zero_rows.push_back({r, zeros});
      continue;
    }
    rows.push_back(std::move(m));
  }
  if (!weighed.empty()) {  // every measured row, runs included, as its keys' weights (a run is such a weighting too)
    if (!zero_rows.empty()) return std::nullopt;
    for (const MeasuredRow& m : rows) weighed.push_back(m.at);
    std::sort(weighed.begin(), weighed.end(), [&](const RowPlace& a, const RowPlace& b) {
      return std::pair(pr.seq_offsets[a.b] + a.t, a.h) < std::pair(pr.seq_offsets[b.b] + b.t, b.h);
    });
    std::optional<KeyRunFit> weights = fit_key_weights(pr, out, ref, row_limit, weighed, scope, tile_sizes, fit);
    if (!weights) weights = fit_split_merge(pr, out, ref, row_limit, weighed, scope, fit);  // splits merged otherwise
    if (weights) weights->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return weights;
  }
  if (!zero_rows.empty()) {
    if (!rows.empty()) return std::nullopt;  // runs and zero keys mixed: no one account
    return fit_zero_keys(pr, out, ref, row_limit, scope, zero_rows, fit, t0);
  }
  fit.measured = fit.explained = static_cast<std::int64_t>(rows.size());
  for (const MeasuredRow& m : rows) {
    if (!m.informative || fit.examples.size() >= 3) continue;
    const std::optional<std::pair<std::int64_t, std::int64_t>> run = nearest_run(m);
    std::ostringstream o;
    o << "token " << m.at.t << " of sequence " << m.at.b << " (head " << m.at.h << "): the spec's keys [" << m.at.spec_first << ", "
      << m.at.spec_last << "], the DUT's output is the run ";
    if (!run) o << "of no key (0)";
    else o << "[" << run->first << ", " << run->second << "]";
    fit.examples.push_back(o.str());
  }
  fit.pattern = run_deviations(rows);
  // The tiles the moved edges lie on, measured: a kernel's tile need not be one of the common ones.
  if (const std::vector<int> more = tiles_of_moved_edges(rows, tile_sizes); more.size() > tile_sizes.size()) {
    tile_sizes = more;
    firsts = first_key_rules(p, tile_sizes), lasts = last_key_rules(p, tile_sizes);
    add_tiled_anchor_rules(p, tile_sizes, firsts, lasts);
  }
  std::vector<Rule> fitting = rules_fitting(rows, firsts, lasts);
  if (fitting.size() > 512) fitting.resize(512);  // each is held to every row below, simplest first
  add_block_plans(p, rows, tile_sizes, firsts, lasts, fitting);
  const RuleChecks checks = check_rules(pr, out, ref, row_limit, scope, fitting, firsts, lasts);
  fit.checked = static_cast<std::int64_t>(checks.rows.size());
  fit.scope = scope_words(p, scope);
  auto found = [&](const std::string& name, const std::string& words) {
    if (!fit.reproduced) fit.reproduced = true, fit.name = name, fit.words = words;
    else if (fit.alternatives.size() < 3) fit.alternatives.push_back(name + " (" + words + ")");
    // Every one: a probe keeps the rules of the case it reproduces too (hold_key_runs_to_probes), by name.
    if (fit.reproducing.size() < 4096) fit.reproducing.push_back({name, words});
  };
  for (std::size_t i = 0; i < fitting.size(); ++i) {
    const Edge& f = firsts[fitting[i].first];
    const Edge& l = lasts[fitting[i].last];
    if (checks.over(i) == 0) found(known_class(p, f, l).empty() ? rule_name(f, l) : known_class(p, f, l), rule_words(f, l));
  }
  // No rule holds on every row: a rule on the rows a condition picks (every measured row among them),
  // the spec on the rest, simplest first.
  if (!fit.reproduced) {
    std::vector<Condition> conditions;
    for (Condition& c : row_conditions(p, tile_sizes))
      if (std::all_of(rows.begin(), rows.end(), [&](const MeasuredRow& m) { return c.holds(m.at); }) &&
          !std::all_of(checks.rows.begin(), checks.rows.end(), [&](const RowPlace& r) { return c.holds(r); }))
        conditions.push_back(std::move(c));
    constexpr std::size_t kConditionalRules = 96;
    for (std::size_t i = 0; i < fitting.size() && i < kConditionalRules; ++i)
      for (const Condition& c : conditions)
        if (checks.over(i, c) == 0) {
          const Edge& f = firsts[fitting[i].first];
          const Edge& l = lasts[fitting[i].last];
          found(rule_name(f, l) + "_in_rows_" + c.name, rule_words(f, l) + ", in the rows " + c.words + " (the others attend the window)");
        }
  }
  if (!fit.reproduced) fit.name = "keys_attended_differ";
  fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return fit;
}

Finding key_run_finding(const KeyRunFit& fit) {
  std::ostringstream first, second;
  first.precision(3);
  const std::string where = fit.scope.empty() ? "" : " in " + fit.scope + " only";
  if (fit.kind == KeyRunKind::splits) {
    if (fit.reproduced) {
      first << "Each failing row is a merge of its splits' partial softmax outputs with other weights than the spec's" << where
            << ": " << fit.words << ".";
      second << "Reproduced row by row: the golden's split outputs merged by that rule give every one of the " << fit.checked
             << " rows it was held to within its limit (the " << fit.failing << " failing ones included; " << fit.measured
             << " of them measured first, each its split weights solved)";
      if (fit.probes_held > 0) second << "; held to " << fit.probes_held << " more case(s) the DUT fails, it reproduces each";
      second << ".";
    } else {
      first << "Each of the " << fit.measured << " failing rows measured is a weighted sum of its splits' partial softmax outputs"
            << where << ": " << fit.words << "; the weights solved row by row give the DUT's row within its limit, and no merge "
            << "rule (the log-sum-exp's base, its max, the sink's term, normalisation, a 16-bit rounding) gives every row.";
      second << "Solved split weights: ";
    }
  } else if (fit.kind == KeyRunKind::weights) {
    if (fit.reproduced) {
      first << "Each failing row is the softmax of its window's keys with some of them counted another number of times" << where
            << ": " << fit.words << ".";
      second << "Reproduced row by row: the golden with the rule's key weights gives every one of the " << fit.checked
             << " rows it was held to within its limit (the " << fit.failing << " failing ones included; " << fit.measured
             << " of them measured first, each its keys' whole-number weights recovered)";
      if (fit.probes_held > 0) second << "; held to " << fit.probes_held << " more case(s) the DUT fails, it reproduces each";
      second << ".";
    } else {
      first << "Each of the " << fit.measured << " failing rows measured is the softmax of its window's keys with a few of them "
            << "counted another number of times (twice, or not at all), or keys outside it counted once" << where
            << ": whole-number weights recovered row by row, each giving the DUT's row within its limit; no rule of a row's "
            << "position (its newest or oldest key, a tile's first or last key on a grid, a whole tile) gives every row's keys.";
      second << "Measured: ";
    }
  } else if (fit.name == "zero_keys_attended") {
    first << "Each failing row is the softmax of its window's keys and of keys of score 0 and value 0" << where << ": "
          << fit.words << ".";
    if (fit.reproduced)
      second << "Reproduced row by row: the golden with those zero keys gives every one of the " << fit.checked
             << " rows it was held to within its limit (the " << fit.failing << " failing ones included).";
    else
      second << "Measured: ";
  } else if (fit.reproduced) {
    first << "Each row attends a run of its own keys other than the window's" << where << ": " << fit.words << ".";
    second << "Reproduced row by row: the golden with the rule's runs gives every one of the " << fit.checked
           << " rows it was held to within its limit (the " << fit.failing << " failing ones included; " << fit.measured
           << " of them measured first, each a run of its own keys)";
    if (fit.probes_held > 0) second << "; held to " << fit.probes_held << " more case(s) the DUT fails, it reproduces each";
    second << ".";
  } else {
    first << "Each of the " << fit.measured << " failing rows measured is the softmax of a run of its own keys other than "
          << "the window's" << where << ", but no rule of a row's position (offsets, query-tile or call rows, tile roundings) "
          << "gives every run.";
    second << "Measured runs: ";
  }
  ConfidenceEvidence ce;
  ce.failing_rows = fit.failing;
  ce.reproduced_rows = fit.reproduced ? fit.failing : 0;
  ce.consistent_rows = fit.reproduced ? -1 : fit.explained * fit.failing / std::max<std::int64_t>(1, fit.measured);
  const ConfidenceRule rule = confidence_from(ce);
  std::vector<std::string> evidence = {first.str()};
  if (fit.reproduced) evidence.push_back(second.str());
  std::string examples;
  for (const std::string& e : fit.examples) examples += (examples.empty() ? "" : "; ") + e;
  if (!examples.empty()) evidence.push_back((fit.reproduced ? "Measured, for example: " : second.str()) + examples + ".");
  if (fit.kind == KeyRunKind::weights && !fit.pattern.empty()) evidence.push_back("The keys counted otherwise: " + fit.pattern + ".");
  else if (fit.kind == KeyRunKind::splits && !fit.pattern.empty()) evidence.push_back("The splits: " + fit.pattern + ".");
  else if (!fit.reproduced && !fit.pattern.empty()) evidence.push_back("How the runs differ from the window's: " + fit.pattern + ".");
  if (!fit.refuted.empty()) evidence.push_back(fit.refuted);
  if (!fit.alternatives.empty()) {
    std::string alt;
    for (const std::string& a : fit.alternatives) alt += (alt.empty() ? "" : "; ") + a;
    evidence.push_back("Also reproducing every row, not told apart on this case: " + alt + ".");
  }
  Finding f{fit.name, FindingSource::key_runs_measured, evidence, rule.confidence, rule.why};
  f.reproduced = fit.reproduced;
  return f;
}

}  // namespace swa::harness
