// Which rows a set holds (rows that fail, rows never written), told as positions: per sequence its
// ranges, and what lines them up with tiles. A kernel's tiles show in where its rows go wrong: a
// range that starts on a multiple of 32 and runs to the sequence's end is the last query tile.
#include <algorithm>
#include <set>
#include <sstream>

#include "steps.hpp"
#include "swa/harness/base/join.hpp"

namespace swa::harness {
namespace {

struct Range {
  std::int64_t first = 0, end = 0;  // [first, end)
};

std::vector<std::vector<Range>> ranges_of(const std::vector<std::vector<bool>>& rows) {
  std::vector<std::vector<Range>> out(rows.size());
  for (std::size_t b = 0; b < rows.size(); ++b)
    for (std::int64_t t = 0; t < static_cast<std::int64_t>(rows[b].size()); ++t)
      if (rows[b][t]) {
        if (!out[b].empty() && out[b].back().end == t) out[b].back().end = t + 1;
        else out[b].push_back({t, t + 1});
      }
  return out;
}

constexpr int kTiles[] = {8, 16, 32, 48, 64, 96, 128, 256};

// The tiles T whose every range starts on a multiple of T and ends on one or at its sequence's end,
// when at least one range starts past 0 (a start at 0 lines up with anything).
std::vector<int> aligned_tiles(const std::vector<std::vector<Range>>& r, const std::vector<std::int64_t>& lens) {
  bool past_zero = false;
  for (const auto& seq : r)
    for (const Range& x : seq) past_zero = past_zero || x.first > 0;
  std::vector<int> out;
  if (!past_zero) return out;
  for (int T : kTiles) {
    bool ok = true;
    for (std::size_t b = 0; b < r.size() && ok; ++b)
      for (const Range& x : r[b]) ok = ok && x.first % T == 0 && (x.end % T == 0 || x.end == lens[b]);
    if (ok) out.push_back(T);
  }
  return out;
}

// The tiles T for which the set is exactly the last, partial T-row tile of every sequence.
std::vector<int> last_partial_tiles(const std::vector<std::vector<Range>>& r, const std::vector<std::int64_t>& lens) {
  std::vector<int> out;
  for (int T : kTiles) {
    bool ok = true, some = false;
    for (std::size_t b = 0; b < r.size() && ok; ++b) {
      const std::int64_t start = lens[b] / T * T;
      if (start == lens[b]) ok = r[b].empty();
      else ok = r[b].size() == 1 && r[b][0].first == start && r[b][0].end == lens[b] && start > 0;
      some = some || !r[b].empty();
    }
    if (ok && some) out.push_back(T);
  }
  return out;
}

std::string tiles_words(const std::vector<int>& t) {
  std::vector<std::string> w;
  for (int x : t) w.push_back(std::to_string(x));
  return join(w, ", ");
}

}  // namespace

std::string row_set_geometry(const std::vector<std::vector<bool>>& rows, const std::vector<std::int64_t>& lens) {
  const auto r = ranges_of(rows);
  std::vector<std::string> parts;
  std::size_t told = 0, with = 0;
  for (std::size_t b = 0; b < r.size(); ++b) {
    if (r[b].empty()) continue;
    ++with;
    if (told >= 4) continue;
    std::vector<std::string> xs;
    for (std::size_t i = 0; i < r[b].size() && i < 4; ++i)
      xs.push_back(r[b][i].end - r[b][i].first == 1 ? std::to_string(r[b][i].first)
                                                    : std::to_string(r[b][i].first) + ".." + std::to_string(r[b][i].end - 1));
    std::string s = "sequence " + std::to_string(b) + " (" + std::to_string(lens[b]) + " tokens): rows " + join(xs, ", ");
    if (r[b].size() > 4) s += " and " + std::to_string(r[b].size() - 4) + " more ranges";
    if (r[b].size() == 1 && r[b][0].end == lens[b] && r[b][0].first > 0) s += " (its last " + std::to_string(lens[b] - r[b][0].first) + ")";
    parts.push_back(s);
    ++told;
  }
  if (parts.empty()) return {};
  std::ostringstream o;
  o << join(parts, "; ");
  if (with > told) o << "; and " << with - told << " more sequence(s)";
  if (with < r.size()) o << "; " << r.size() - with << " sequence(s) have none";
  if (const auto last = last_partial_tiles(r, lens); !last.empty())
    o << ". Exactly the last, partial query tile of every sequence, for a tile of " << tiles_words(last)
      << " rows (a sequence whose length is a multiple has none)";
  else if (const auto aligned = aligned_tiles(r, lens); !aligned.empty())
    o << ". Every range starts on a multiple of " << tiles_words(aligned) << " and ends on one or at its sequence's end";
  return o.str();
}

std::string failing_rows_geometry(const Scenario& s, const BisectRun& e, RowsOf which) {
  const AttnParams& p = e.reference->problem.params;
  std::vector<std::vector<bool>> rows(p.batch);
  std::vector<std::int64_t> lens(p.batch);
  std::int64_t in = 0, all = 0;
  for (int b = 0; b < p.batch; ++b) {
    lens[b] = p.seq_lens[b];
    rows[b].assign(p.seq_lens[b], false);
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t) {
      ++all;
      for (int h = 0; h < s.heads && !rows[b][t]; ++h) {
        const RowError r = row_error(s, e, b, t, h);
        const bool failing = r.worst > limit_of(e, b, t);
        rows[b][t] = which == RowsOf::non_finite ? !r.finite_output : failing && (which == RowsOf::failing || r.zero_output);
      }
      in += rows[b][t];
    }
  }
  if (in == 0 || in == all) return {};
  return row_set_geometry(rows, lens);
}

}  // namespace swa::harness
