// Output rows in the wrong place (placement.hpp).
#include "placement.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

namespace swa::harness {
namespace {

struct Row {
  int sequence = 0;
  std::int64_t token = 0;
  int head = 0;
};

// What a map from the row that holds an output to the row it belongs to does, in words.
std::string relation(const AttnParams& p, const Row& at, const Row& from) {
  std::ostringstream o;
  const bool decode = p.mode == RunMode::decode && at.token >= prompt_len(p, at.sequence);
  o << (decode ? "decode rows" : "rows");
  if (from.sequence != at.sequence) o << " of sequence " << at.sequence << " hold sequence " << from.sequence << "'s";
  else o << " hold their own sequence's";
  const std::int64_t dt = from.token - at.token;
  if (dt == 0) o << " at the same token";
  else o << " from " << std::abs(dt) << " token(s) " << (dt < 0 ? "earlier" : "later");
  if (from.head != at.head) o << ", head " << at.head << " holding head " << from.head << "'s";
  else o << ", same head";
  return o.str();
}

}  // namespace

std::optional<Placement> fit_output_placement(const AttnParams& p, const std::vector<double>& out, const std::vector<double>& ref,
                                              const std::vector<double>& row_limit) {
  const int d = p.head_size;
  auto index = [&](const Row& r) {
    return (static_cast<std::size_t>(p.seq_offsets[r.sequence] + r.token) * p.heads_q + r.head) * d;
  };
  auto limit = [&](const Row& r) {
    const double l = row_limit[static_cast<std::size_t>(p.seq_offsets[r.sequence] + r.token)];
    return std::isfinite(l) && l > 0 ? l : 1e-30;
  };
  // Worst |a - b| over a row, infinite when either is not finite; past `stop` the rest is not read.
  auto distance = [&](std::size_t a, const std::vector<double>& x, std::size_t b, const std::vector<double>& y,
                      double stop = std::numeric_limits<double>::infinity()) {
    double worst = 0;
    for (int k = 0; k < d && worst <= stop; ++k) {
      const double e = std::abs(x[a + k] - y[b + k]);
      if (!std::isfinite(e)) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, e);
    }
    return worst;
  };
  std::vector<Row> rows, failing;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        rows.push_back({b, t, h});
        if (distance(index(rows.back()), out, index(rows.back()), ref) > limit(rows.back())) failing.push_back(rows.back());
      }
  if (failing.empty()) return std::nullopt;
  Placement placement;
  placement.failing = static_cast<std::int64_t>(failing.size());
  std::map<std::string, std::int64_t> counts;
  for (const Row& at : failing) {
    const double l = limit(at);
    int matches = 0;
    Row from;
    for (const Row& r : rows) {
      if (r.sequence == at.sequence && r.token == at.token && r.head == at.head) continue;
      if (distance(index(at), out, index(r), ref, l) <= l && ++matches == 1) from = r;
      if (matches > 1) break;
    }
    if (matches != 1) continue;  // no row's output, or several alike: not placed
    ++placement.placed;
    ++counts[relation(p, at, from)];
  }
  // Most failing rows placed, and a few at least: a map, not a coincidence.
  if (placement.placed < 4 || 2 * placement.placed <= placement.failing) return std::nullopt;
  std::vector<std::pair<std::int64_t, std::string>> ranked;
  for (const auto& [words, n] : counts) ranked.push_back({n, words});
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; i < ranked.size() && i < 4; ++i)
    placement.patterns.push_back(ranked[i].second + " (" + std::to_string(ranked[i].first) + " row(s))");
  if (ranked.size() > 4) placement.patterns.push_back(std::to_string(ranked.size() - 4) + " other relation(s)");
  return placement;
}

Finding placement_finding(const Placement& placement) {
  std::ostringstream first, second;
  first << "The DUT computes the right rows and puts them in the wrong places: " << placement.placed << " of the "
        << placement.failing << " failing (token, head) rows hold the golden output of exactly one other row, within its limit: ";
  for (std::size_t i = 0; i < placement.patterns.size(); ++i) first << (i ? "; " : "") << placement.patterns[i];
  first << ".";
  second << "Reproduced by the golden's rows placed so: " << placement.placed << " of the " << placement.failing
         << " failing rows (an output written to another row, or computed from another row's Q, K and V).";
  const bool every = placement.placed == placement.failing;
  Finding f{"output_rows_misplaced", FindingSource::output_placement, {first.str(), second.str()},
            every ? Confidence::high : Confidence::medium,
            (every ? "every one" : std::to_string(placement.placed)) + " of the " + std::to_string(placement.failing) +
                " failing rows " + (every ? "is" : "are") + " another row's golden output" +
                (every ? "" : "; the others are no row's")};
  f.reproduced = every;
  return f;
}

}  // namespace swa::harness
