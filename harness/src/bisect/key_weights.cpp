#include "key_weights.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

namespace swa::harness {
namespace {

using namespace key_run_rules;

// A rule of which keys a row counts another number of times, as a function of where it sits.
struct WeightRule {
  std::string name, words;
  int complexity = 0;
  std::function<std::vector<SignedKey>(const RowPlace&)> keys;
};

// The grids a tile's keys can be counted on: positions, the row's window, its call, the packed batch.
struct Grid {
  std::string name, words;
  std::function<std::int64_t(const RowPlace&)> origin;
  int complexity;
};

std::vector<WeightRule> weight_rules(const std::vector<int>& tiles) {
  std::vector<WeightRule> rules;
  rules.push_back({"newest_key_counted_twice", "its newest key (the last it sees; its own in causal attention) is counted twice", 1,
                   [](const RowPlace& r) { return std::vector<SignedKey>{{r.spec_last, +1}}; }});
  rules.push_back({"oldest_key_counted_twice", "its oldest key (the window's first) is counted twice", 1,
                   [](const RowPlace& r) { return std::vector<SignedKey>{{r.spec_first, +1}}; }});
  const std::vector<Grid> grids = {
      {"", "on multiples of T of the sequence's positions", [](const RowPlace&) { return std::int64_t{0}; }, 0},
      {"_from_window_start", "counted from the window's first key", [](const RowPlace& r) { return r.spec_first; }, 1},
      {"_of_call", "counted from its call's first row", [](const RowPlace& r) { return r.c0; }, 1},
      {"_of_packed_batch", "on multiples of T of the packed batch's rows", [](const RowPlace& r) { return -r.packed; }, 1}};
  for (int T : tiles) {
    const std::string n = std::to_string(T);
    rules.push_back({"newest_tile_counted_twice_" + n, "the keys of its newest " + n + "-key tile (on multiples of " + n +
                     ") are counted twice", 2, [T](const RowPlace& r) {
                       std::vector<SignedKey> k;
                       for (std::int64_t j = std::max(r.spec_first, floor_to(r.spec_last, T)); j <= r.spec_last; ++j) k.push_back({j, +1});
                       return k;
                     }});
    rules.push_back({"oldest_tile_counted_twice_" + n, "the keys of its oldest " + n + "-key tile (on multiples of " + n +
                     ") are counted twice", 2, [T](const RowPlace& r) {
                       std::vector<SignedKey> k;
                       for (std::int64_t j = r.spec_first; j <= std::min(r.spec_last, floor_to(r.spec_first, T) + T - 1); ++j)
                         k.push_back({j, +1});
                       return k;
                     }});
    // Blocks of T keys before its own counted down (floor(keys / T), at least 1), not up: the keys past
    // the last whole block are never walked; its own key is attended apart (a decode step's new token).
    rules.push_back({"keys_past_the_last_whole_" + n + "_key_block_left_out",
                     "the keys before its own past the last whole " + n + "-key block (counted from the window's first "
                     "key, one block at least) are left out, its own key kept: the block count rounded down, not up",
                     3, [T](const RowPlace& r) {
                       std::vector<SignedKey> k;
                       const std::int64_t before = r.spec_last - r.spec_first;  // keys before its own
                       const std::int64_t walked = std::max<std::int64_t>(1, before / T) * T;
                       for (std::int64_t j = r.spec_first + walked; j < r.spec_last; ++j) k.push_back({j, -1});
                       return k;
                     }});
    for (const Grid& g : grids)
      for (const bool tile_first : {true, false})
        for (const int delta : {+1, -1})
          for (const bool window_edge_too : {false, true}) {
            std::string grid_words = g.words;
            if (const auto at = grid_words.find(" T "); at != std::string::npos) grid_words.replace(at + 1, 1, n);
            const std::string which = tile_first ? "first" : "last";
            const std::string name = std::string("tile_") + which + "_key_" + (delta > 0 ? "counted_twice_" : "left_out_") + n +
                                     g.name + (window_edge_too ? "_window_edge_too" : "");
            std::string words = "the " + which + " key of each " + n + "-key tile (" + grid_words + ") inside its window" +
                                (window_edge_too ? ", the window's own " + which + " key too (not the grid's " + which +
                                                       " key: no tile " + (tile_first ? "before" : "after") + " it)," : "") + " is " +
                                (delta > 0 ? "counted twice" : "left out");
            words += tile_first ? (delta > 0 ? " (a tile read as [start, start + " + n + "], its end included: the next tile's first key read by both)"
                                             : " (a tile's loop starting one past its first key)")
                                : (delta > 0 ? " (tiles overlapping by one key)" : " (a tile's loop stopping one short of its end)");
            rules.push_back({name, words, 3 + g.complexity + window_edge_too,
                             [T, tile_first, delta, window_edge_too, origin = g.origin](const RowPlace& r) {
                               const std::int64_t o = origin(r), want = tile_first ? 0 : T - 1;
                               std::vector<SignedKey> k;
                               const std::int64_t first = floor_to(r.spec_first - o, T) + o + want;
                               for (std::int64_t j = first; j <= r.spec_last; j += T) {
                                 if (j < r.spec_first) continue;
                                 if (!window_edge_too && j == (tile_first ? r.spec_first : r.spec_last)) continue;
                                 if (window_edge_too && j == (tile_first ? o : r.last_key)) continue;
                                 k.push_back({j, delta});
                               }
                               return k;
                             }});
          }
  }
  std::stable_sort(rules.begin(), rules.end(), [](const WeightRule& a, const WeightRule& b) { return a.complexity < b.complexity; });
  return rules;
}

std::string keys_words(const std::vector<SignedKey>& keys, const RowPlace& r) {
  std::vector<std::int64_t> twice, left_out, outside;
  for (const SignedKey& k : keys)
    (k.key < r.spec_first || k.key > r.spec_last ? outside : k.delta > 0 ? twice : left_out).push_back(k.key);
  auto list = [](const std::vector<std::int64_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return v.size() > 8 ? s + ", ... (" + std::to_string(v.size()) + ")" : s;
  };
  std::vector<std::string> parts;
  if (!twice.empty()) parts.push_back("keys " + list(twice) + " counted twice");
  if (!left_out.empty()) parts.push_back("keys " + list(left_out) + " left out");
  if (!outside.empty()) parts.push_back("keys " + list(outside) + " outside it counted once");
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

// What the measured rows' keys share, in words: whose keys they are, and the grid they lie on.
std::string weights_pattern(const std::vector<std::pair<RowPlace, std::vector<SignedKey>>>& rows) {
  std::int64_t keys = 0, newest = 0, oldest = 0, twice = 0, left_out = 0, outside = 0;
  std::int64_t gcd_abs = 0, gcd_window = 0;
  for (const auto& [r, ks] : rows)
    for (const SignedKey& k : ks) {
      ++keys;
      newest += k.key == r.spec_last, oldest += k.key == r.spec_first;
      const bool out = k.key < r.spec_first || k.key > r.spec_last;
      outside += out, twice += !out && k.delta > 0, left_out += !out && k.delta < 0;
      gcd_abs = std::gcd(gcd_abs, k.key);
      if (k.key != r.spec_first) gcd_window = std::gcd(gcd_window, k.key - r.spec_first);
    }
  std::ostringstream o;
  o << keys << " keys over the " << rows.size() << " rows: " << twice << " counted twice, " << left_out
    << " left out from inside the window, " << outside << " outside it counted once";
  if (newest == keys) o << "; every one is its row's newest key";
  else if (oldest == keys) o << "; every one is its row's oldest key";
  if (gcd_abs >= 2) o << "; every one at a position on a multiple of " << gcd_abs;
  else if (gcd_window >= 2) o << "; every one a multiple of " << gcd_window << " keys past its window's first";
  return o.str();
}

// The tiles the rules try: the common ones and any the measured keys lie on (the greatest common
// divisor of their distances from each grid's origin, and its divisors): a kernel's tile need not be
// one of a list.
std::vector<int> tiles_with_measured_grids(const std::vector<int>& tiles,
                                           const std::vector<std::pair<RowPlace, std::vector<SignedKey>>>& rows) {
  std::set<int> all(tiles.begin(), tiles.end());
  const std::vector<std::function<std::int64_t(const RowPlace&)>> origins = {
      [](const RowPlace&) { return std::int64_t{0}; }, [](const RowPlace& r) { return r.spec_first; },
      [](const RowPlace& r) { return r.c0; }, [](const RowPlace& r) { return -r.packed; }};
  for (const auto& origin : origins)
    for (const std::int64_t shift : {0, 1}) {  // a tile's first key, or its last (one before the next's first)
      std::int64_t g = 0;
      for (const auto& [r, keys] : rows)
        for (const SignedKey& k : keys)
          if (k.key != r.spec_first) g = std::gcd(g, k.key - origin(r) + shift);
      if (g < 2 || g > 4096) continue;
      for (std::int64_t x = 2; x <= g; ++x)
        if (g % x == 0 && g / x <= 8) all.insert(static_cast<int>(x));
    }
  return {all.begin(), all.end()};
}

}  // namespace

std::optional<std::vector<SignedKey>> recover_key_weights(const RowRuns& runs, const RowPlace& r, const double* o, double limit) {
  const std::int64_t n = runs.keys();
  const int d = runs.dims();
  const std::int64_t f = std::max<std::int64_t>(0, r.spec_first), l = std::min(r.spec_last, n - 1);
  if (f > l) return std::nullopt;
  // The row's equation: sum_j w_j e_j (v_j - o) - sink * o = 0, linear in the weights w. The residual
  // of the spec's weights, and each key's column u_j = e_j (v_j - o).
  const long double z = runs.run_weight(f, l) + runs.sink();
  std::vector<double> res(d), u(static_cast<std::size_t>(n) * d), norm2(n, 0.0);
  for (int x = 0; x < d; ++x) res[x] = static_cast<double>(runs.run_value(f, l, x) - o[x] * z);
  std::vector<char> candidate(n, 0);
  for (std::int64_t j = 0; j < n; ++j) {
    const long double w = runs.weight(j);
    double most = 0;
    for (int x = 0; x < d; ++x) {
      const double c = static_cast<double>(runs.weighted_value(j, x) - o[x] * w);
      u[j * d + x] = c, norm2[j] += c * c, most = std::max(most, std::abs(c));
    }
    // A key whose one count moves the row by less than a quarter of its limit cannot be told.
    candidate[j] = most / static_cast<double>(z) > 0.25 * limit;
  }
  double left = 0;
  for (int x = 0; x < d; ++x) left += res[x] * res[x];
  std::vector<SignedKey> chosen;
  constexpr std::size_t kMostKeys = 48;
  while (chosen.size() < kMostKeys) {
    std::int64_t best = -1;
    int best_delta = 0;
    double best_left = left * 0.98;
    for (std::int64_t j = 0; j < n; ++j) {
      if (!candidate[j]) continue;
      double dot = 0;
      for (int x = 0; x < d; ++x) dot += u[j * d + x] * res[x];
      const bool inside = j >= f && j <= l;
      for (const int delta : {+1, -1}) {
        if (delta < 0 && !inside) continue;  // a key outside the window is counted at most once
        const double after = left + 2 * delta * dot + norm2[j];
        if (after < best_left) best_left = after, best = j, best_delta = delta;
      }
    }
    if (best < 0) return std::nullopt;
    candidate[best] = 0;  // each key's count moves once
    for (int x = 0; x < d; ++x) res[x] += best_delta * u[best * d + x];
    left = 0;
    for (int x = 0; x < d; ++x) left += res[x] * res[x];
    chosen.push_back({best, best_delta});
    if (runs.matches_weighted(f, l, chosen, o, limit)) {
      std::sort(chosen.begin(), chosen.end(), [](const SignedKey& a, const SignedKey& b) { return a.key < b.key; });
      return chosen;
    }
  }
  return std::nullopt;
}

std::optional<KeyRunFit> fit_key_weights(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                         const std::vector<double>& row_limit, const std::vector<RowPlace>& measured,
                                         const std::set<CallKind>& scope, const std::vector<int>& tiles, KeyRunFit fit) {
  const AttnParams& p = pr.params;
  constexpr std::size_t kMeasured = 64;
  std::vector<RowPlace> sample;
  for (std::size_t i = 0; i < std::min(kMeasured, measured.size()); ++i)
    sample.push_back(measured[i * measured.size() / std::min(kMeasured, measured.size())]);
  std::vector<std::pair<RowPlace, std::vector<SignedKey>>> rows;
  for (const RowPlace& r : sample) {
    std::optional<std::vector<SignedKey>> keys = recover_key_weights(RowRuns(pr, r), r, row_of(out, pr, r), limit_of(row_limit, pr, r));
    if (!keys) return std::nullopt;
    rows.push_back({r, std::move(*keys)});
  }
  const std::vector<WeightRule> rules = weight_rules(tiles_with_measured_grids(tiles, rows));
  std::vector<char> fits(rules.size(), 1);
  for (const auto& [r, keys] : rows) {
    const RowRuns runs(pr, r);
    const double* o = row_of(out, pr, r);
    const double limit = limit_of(row_limit, pr, r);
    for (std::size_t i = 0; i < rules.size(); ++i)
      if (fits[i]) fits[i] = runs.matches_weighted(r.spec_first, r.spec_last, rules[i].keys(r), o, limit);
  }
  fit.kind = KeyRunKind::weights;
  fit.measured = fit.explained = static_cast<std::int64_t>(rows.size());
  fit.scope = scope_words(p, scope);
  fit.pattern = weights_pattern(rows);
  for (std::size_t i = 0; i < rows.size() && i < 3; ++i) {
    const RowPlace& r = rows[i].first;
    fit.examples.push_back("token " + std::to_string(r.t) + " of sequence " + std::to_string(r.b) + " (head " + std::to_string(r.h) +
                           "): its window's keys [" + std::to_string(r.spec_first) + ", " + std::to_string(r.spec_last) + "] with " +
                           keys_words(rows[i].second, r));
  }
  // Each rule that gives every measured row, computed on every row of the call kinds.
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < rules.size() && kept.size() < 64; ++i)
    if (fits[i]) kept.push_back(i);
  std::vector<char> holds(kept.size(), 1);
  fit.checked = 0;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        RowPlace r = place(p, b, t, h);
        if (!scope.count(kind_of(r)) || std::none_of(holds.begin(), holds.end(), [](char c) { return c; })) continue;
        r.spec_first = spec_first_at(p, r.t), r.spec_last = spec_last_at(p, r, r.t);
        ++fit.checked;
        const double* o = row_of(out, pr, r);
        const double limit = limit_of(row_limit, pr, r);
        const bool passes = row_passes(pr, out, ref, row_limit, r);
        std::optional<RowRuns> runs;
        for (std::size_t i = 0; i < kept.size(); ++i) {
          if (!holds[i]) continue;
          const std::vector<SignedKey> keys = rules[kept[i]].keys(r);
          if (keys.empty()) {
            holds[i] = passes;
            continue;
          }
          if (!finite_row(o, p.head_size)) {
            holds[i] = 0;
            continue;
          }
          if (!runs) runs.emplace(pr, r);
          holds[i] = runs->matches_weighted(r.spec_first, r.spec_last, keys, o, limit);
        }
      }
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (!holds[i]) continue;
    const WeightRule& rule = rules[kept[i]];
    if (!fit.reproduced) fit.reproduced = true, fit.name = rule.name, fit.words = rule.words;
    else if (fit.alternatives.size() < 3) fit.alternatives.push_back(rule.name + " (" + rule.words + ")");
    if (fit.reproducing.size() < 128) fit.reproducing.push_back({rule.name, rule.words});
  }
  // Without a rule, the class says what the measured weights are.
  bool twice = false, left_out = false, outside = false;
  for (const auto& [r, ks] : rows)
    for (const SignedKey& k : ks) {
      const bool out_of_window = k.key < r.spec_first || k.key > r.spec_last;
      outside |= out_of_window, twice |= !out_of_window && k.delta > 0, left_out |= !out_of_window && k.delta < 0;
    }
  fit.unruled_name = twice + left_out + outside > 1 ? "keys_weighted_otherwise"
                     : twice                       ? "keys_counted_twice"
                     : left_out                    ? "keys_left_out_inside_the_window"
                                                   : "keys_outside_the_window_counted";
  if (!fit.reproduced) fit.name = fit.unruled_name;
  return fit;
}

}  // namespace swa::harness
