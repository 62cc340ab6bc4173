// The recovered rows told as one finding (classify_recovery): which keys the DUT added or dropped,
// and how it weighed the right ones.
#include "recover.hpp"

#include "semantics.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <numeric>
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

namespace {

// Weights below this are read as zero: the fit's noise from an output rounded to the dtype.
double weight_noise(DType dt) { return dt == DType::fp32 ? 0.005 : dt == DType::fp16 ? 0.02 : 0.08; }

// The smallest golden weight whose DUT weight is precise enough to compare ratios of.
double ratio_floor(DType dt) { return dt == DType::fp32 ? 1e-3 : dt == DType::fp16 ? 0.05 : 0.2; }

// The first position of the prompt chunk holding row t of sequence b; -1 in a prefill or a decode step.
std::int64_t chunk_start_of(const AttnParams& p, int b, std::int64_t t) {
  if (p.mode == RunMode::prefill) return -1;
  const std::int64_t prompt = prompt_len(p, b);
  if (t >= prompt) return -1;
  const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
  return t / chunk * chunk;
}

// Ring slots of a cached run (a ring holds W = left + 1 keys); 0 without a ring.
std::int64_t ring_slots(const AttnParams& p) {
  const bool ring = p.cache == CachePolicy::ring_modulo || p.cache == CachePolicy::ring_compact;
  return p.mode != RunMode::prefill && ring && p.band.left >= 0 ? p.band.left + 1 : 0;
}

int own_kv_head(const RecoveredRow& r, const AttnParams& p) { return kv_head_for(r.q_head, p.heads_q, p.heads_kv); }

bool is_own(const AttentionCandidate& k, const RecoveredRow& r, const AttnParams& p) {
  return k.sequence == r.sequence && k.kv_head == own_kv_head(r, p);
}

std::string describe_key(const AttentionCandidate& k, const RecoveredRow& r, const AttnParams& p) {
  const int own_kv = own_kv_head(r, p);
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
  if (const std::int64_t start = chunk_start_of(p, r.sequence, r.token); start > 0 && k.position < start)
    o << ", before the query's chunk, which starts at " << start;
  if (const std::int64_t slots = ring_slots(p); slots > 0 && distance == slots)
    o << ", the key the query's ring slot held before the query's own write";
  else if (slots > 0 && p.cache == CachePolicy::ring_modulo && k.position >= slots && k.position % slots == 0)
    o << ", written as the ring wrapped to slot 0";
  return o.str();
}

std::string query_name(const RecoveredRow& r) {
  std::ostringstream o;
  o << "query " << r.token << " of sequence " << r.sequence << " (head " << r.q_head << ")";
  return o.str();
}

std::string attends(const RecoveredRow& r, int c, const AttnParams& p) {
  std::ostringstream o;
  o << query_name(r) << " gives " << describe_key(r.candidates[c], r, p) << " weight " << r.weights[c]
    << "; the golden gives it " << r.golden[c];
  return o.str();
}

struct KeyDifferences {
  std::vector<int> extra, missing;  // candidates the DUT weighs and the golden does not, and the reverse
};

KeyDifferences differing_keys(const RecoveredRow& r, double noise) {
  KeyDifferences k;
  for (int c = 0; c < static_cast<int>(r.candidates.size()); ++c) {
    if (r.golden[c] == 0 && r.weights[c] > noise) k.extra.push_back(c);
    // Missing: weighed at noise level, not merely lighter (a sharper softmax makes small weights smaller).
    if (r.golden[c] > noise && r.weights[c] <= std::max(noise, 0.05 * r.golden[c])) k.missing.push_back(c);
  }
  return k;
}

// The fitted rows with their differences, and the questions the classes ask of them.
struct FittedRows {
  const AttnParams& p;
  std::vector<const RecoveredRow*> rows;
  std::vector<KeyDifferences> keys;

  // The first (row, candidate) among the extra (or missing) keys for which pred holds, and how many
  // rows have one.
  template <class Pred>
  std::pair<std::optional<std::pair<std::size_t, int>>, int> find(bool extra, Pred pred) const {
    std::optional<std::pair<std::size_t, int>> first;
    int count = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      bool here = false;
      for (int c : extra ? keys[i].extra : keys[i].missing)
        if (pred(*rows[i], rows[i]->candidates[c])) {
          if (!first) first = std::pair(i, c);
          here = true;
        }
      count += here;
    }
    return {first, count};
  }
  bool any_missing() const {
    return std::any_of(keys.begin(), keys.end(), [](const KeyDifferences& k) { return !k.missing.empty(); });
  }
  bool any_extra() const {
    return std::any_of(keys.begin(), keys.end(), [](const KeyDifferences& k) { return !k.extra.empty(); });
  }
  std::string share(int count) const {
    return std::to_string(count) + " of the " + std::to_string(rows.size()) + " fitted failing rows show it";
  }
};

// Rows whose missing keys are one aligned block running to the row's last visible key: a key tile
// the kernel skipped. A key just below the first missing one whose golden weight is under the noise
// may belong to the block too, so the block may start lower, at the most aligned position whose keys
// up to the end are all absent or too light to tell. Its alignment (the largest power of two
// dividing its first key, over rows) is the tile size or a multiple of it; 0 when the rows do not
// look like that. `example` gets the row with the longest block and the block's bounds.
struct DroppedBlock {
  std::int64_t alignment = 0;
  std::size_t row = 0;
  std::int64_t first = 0, last = 0;
};

DroppedBlock dropped_tile(const FittedRows& f, double noise) {
  DroppedBlock found;
  std::int64_t alignment = 0, longest = 0;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const RecoveredRow& r = *f.rows[i];
    if (f.keys[i].missing.empty()) continue;
    std::map<std::int64_t, bool> absent;  // visible own keys by position: absent or too light to tell
    for (std::size_t c = 0; c < r.candidates.size(); ++c)
      if (r.golden[c] > 0) absent[r.candidates[c].position] = r.weights[c] <= std::max(noise, 0.25 * r.golden[c]);
    std::int64_t lowest_missing = INT64_MAX;
    for (int c : f.keys[i].missing) {
      if (!is_own(r.candidates[c], r, f.p)) return {};
      lowest_missing = std::min(lowest_missing, r.candidates[c].position);
    }
    const std::int64_t last = absent.rbegin()->first;
    for (auto it = absent.find(lowest_missing); it != absent.end(); ++it)
      if (!it->second) return {};  // a key the DUT weighs inside the block: not one block
    std::int64_t start = lowest_missing, best = lowest_missing;
    auto aligned = [](std::int64_t x) { return x == 0 ? INT64_MAX : (x & -x); };
    for (auto it = absent.find(lowest_missing); it != absent.begin();) {
      --it;
      if (!it->second || it->first != start - 1) break;
      start = it->first;
      if (aligned(start) > aligned(best)) best = start;
    }
    // The example: the longest block that does not start at 0 (one that does tells no alignment).
    const bool better = longest == 0 || (best > 0 && found.first == 0) ||
                        ((best > 0) == (found.first > 0) && last - best + 1 > longest);
    if (better) found = {0, i, best, last}, longest = last - best + 1;
    if (best > 0) alignment = alignment == 0 ? aligned(best) : std::min(alignment, aligned(best));
  }
  found.alignment = longest >= 2 && alignment >= 4 ? alignment : 0;
  return found;
}

// Every failing row's missing keys lie before its prompt chunk: the chunk attended itself only.
bool only_keys_before_the_chunk(const FittedRows& f) {
  bool any = false;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const RecoveredRow& r = *f.rows[i];
    if (f.keys[i].missing.empty()) continue;
    const std::int64_t start = chunk_start_of(f.p, r.sequence, r.token);
    if (start <= 0) return false;
    for (int c : f.keys[i].missing)
      if (!is_own(r.candidates[c], r, f.p) || r.candidates[c].position >= start) return false;
    any = true;
  }
  return any;
}

// Over the rows whose missing keys are all before their chunk: how many visible keys before the
// chunk each kept (the fewest, over rows that lost some).
std::int64_t kept_keys_before_the_chunk(const FittedRows& f) {
  std::int64_t fewest = INT64_MAX;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const RecoveredRow& r = *f.rows[i];
    if (f.keys[i].missing.empty()) continue;
    const std::int64_t start = chunk_start_of(f.p, r.sequence, r.token);
    std::int64_t kept = 0;
    for (std::size_t c = 0; c < r.candidates.size(); ++c)
      if (is_own(r.candidates[c], r, f.p) && r.golden[c] > 0 && r.candidates[c].position < start &&
          std::find(f.keys[i].missing.begin(), f.keys[i].missing.end(), static_cast<int>(c)) == f.keys[i].missing.end())
        ++kept;
    fewest = std::min(fewest, kept);
  }
  return fewest == INT64_MAX ? 0 : fewest;
}

// The n when every row that lost keys lost exactly positions [start - n, start) of its chunk; 0 otherwise.
std::int64_t boundary_keys_lost(const FittedRows& f) {
  std::int64_t n = -1;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const RecoveredRow& r = *f.rows[i];
    if (f.keys[i].missing.empty()) continue;
    const std::int64_t start = chunk_start_of(f.p, r.sequence, r.token);
    std::int64_t lowest = start;
    for (int c : f.keys[i].missing) lowest = std::min(lowest, r.candidates[c].position);
    const std::int64_t here = start - lowest;
    if (here != static_cast<std::int64_t>(f.keys[i].missing.size()) || (n >= 0 && here != n)) return 0;
    n = here;
  }
  return std::max<std::int64_t>(n, 0);
}

// log w - log p = (alpha - 1) s + c_row for a kernel whose scores are alpha times the golden's: one
// slope over every fitted row, each row with its own intercept (the normalisation); the RMS of the
// fit's residual; the most weighed keys of a row.
struct ScaleFit {
  double slope = 0, rms = 0;
  int keys = 0, widest = 0;
};
ScaleFit fit_scale(const FittedRows& f) {
  std::vector<std::vector<std::pair<double, double>>> rows;
  for (const RecoveredRow* row : f.rows) {
    std::vector<std::pair<double, double>> points;
    double dut_sum = 0, golden_sum = 0;
    for (std::size_t c = 0; c < row->weights.size(); ++c) dut_sum += row->weights[c], golden_sum += row->golden[c];
    for (std::size_t c = 0; c < row->weights.size(); ++c)
      if (row->golden[c] > 1e-3 && row->weights[c] > 1e-3 && std::isfinite(row->scores[c]))
        points.push_back({row->scores[c], std::log(row->weights[c] / dut_sum) - std::log(row->golden[c] / golden_sum)});
    if (points.size() < 2) continue;
    double mx = 0, my = 0;
    for (const auto& [x, y] : points) mx += x, my += y;
    mx /= static_cast<double>(points.size()), my /= static_cast<double>(points.size());
    for (auto& [x, y] : points) x -= mx, y -= my;
    rows.push_back(std::move(points));
  }
  ScaleFit r;
  double sxx = 0, sxy = 0;
  for (const auto& points : rows) {
    for (const auto& [x, y] : points) sxx += x * x, sxy += x * y;
    r.keys += static_cast<int>(points.size());
    r.widest = std::max(r.widest, static_cast<int>(points.size()));
  }
  r.slope = sxx > 1e-12 ? sxy / sxx : 0;
  double sq = 0;
  for (const auto& points : rows)
    for (const auto& [x, y] : points) sq += (y - r.slope * x) * (y - r.slope * x);
  r.rms = r.keys > 0 ? std::sqrt(sq / r.keys) : 0;
  return r;
}

// Whether scores scaled by 1 + slope alone predict every missing key's weight at noise level: then a
// sharper softmax, not a dropped key.
bool scale_explains_missing(const FittedRows& f, const ScaleFit& sf, double noise) {
  if (std::abs(sf.slope) <= 0.05 || sf.widest < 3 || sf.rms > 0.05) return false;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const RecoveredRow& r = *f.rows[i];
    double z = 0;
    for (std::size_t c = 0; c < r.weights.size(); ++c)
      if (r.golden[c] > 0 && std::isfinite(r.scores[c])) z += r.golden[c] * std::exp(sf.slope * r.scores[c]);
    for (int c : f.keys[i].missing)
      if (!(z > 0) || !std::isfinite(r.scores[c]) || r.golden[c] * std::exp(sf.slope * r.scores[c]) / z > 2 * noise)
        return false;
  }
  return true;
}

// The ratio DUT weight / golden weight is constant within aligned blocks of `tile` keys but not
// across them: an online softmax that does not rescale its accumulator when the running max grows.
std::int64_t rescaled_tile(const FittedRows& f) {
  const double floor = ratio_floor(f.p.dtype);
  for (std::int64_t tile : {128, 64, 32, 16, 8, 4}) {
    bool constant_within = true, differs_across = false;
    for (const RecoveredRow* r : f.rows) {
      std::map<std::int64_t, std::pair<double, double>> range;  // tile -> (min, max) ratio
      for (std::size_t c = 0; c < r->candidates.size(); ++c)
        if (r->golden[c] > floor) {
          const double ratio = r->weights[c] / r->golden[c];
          auto [it, fresh] = range.try_emplace(r->candidates[c].position / tile, ratio, ratio);
          it->second = {std::min(it->second.first, ratio), std::max(it->second.second, ratio)};
        }
      double lowest = INFINITY, highest = 0;
      for (const auto& [t, mm] : range) {
        constant_within = constant_within && mm.second <= mm.first * 1.01 + 1e-9;
        lowest = std::min(lowest, mm.first);
        highest = std::max(highest, mm.second);
      }
      differs_across = differs_across || (range.size() >= 2 && highest > 1.05 * lowest);
    }
    if (constant_within && differs_across) return tile;
  }
  return 0;
}

// The fewest significant bits that hold every sizeable weight ratio w_j / w_max of every row (a P
// rounded to a b-bit type before P.V keeps these ratios on a b-bit grid); 0 when 12 bits do not, or
// when fewer than 3 ratios leave it to chance.
int quantised_bits(const FittedRows& f) {
  std::vector<double> ratios;
  for (const RecoveredRow* r : f.rows) {
    double top = 0;
    for (double w : r->weights) top = std::max(top, w);
    for (double w : r->weights)
      if (w > 0.02 && w < top) ratios.push_back(w / top);
  }
  if (ratios.size() < 3) return 0;
  for (int bits = 2; bits <= 12; ++bits) {
    const bool on_grid = std::all_of(ratios.begin(), ratios.end(), [&](double x) {
      int e = 0;
      const double m = std::frexp(x, &e);
      const double grid = std::ldexp(std::round(std::ldexp(m, bits)), e - bits);
      return std::abs(x - grid) <= 1e-4 * x;
    });
    if (on_grid) return bits;
  }
  return 0;
}

}  // namespace

static std::optional<ConfidenceEvidence> rows_that_show_it(const std::vector<std::string>& evidence) {
  static const std::string tail = " fitted failing rows show it";
  for (const std::string& line : evidence) {
    const std::size_t end = line.find(tail);
    if (end == std::string::npos) continue;
    // "... N of the M" + tail: read M back from `end`, then N before " of the ".
    std::size_t m0 = end;
    while (m0 > 0 && std::isdigit(static_cast<unsigned char>(line[m0 - 1]))) --m0;
    const std::string of = " of the ";
    if (m0 == end || m0 < of.size() || line.compare(m0 - of.size(), of.size(), of) != 0) continue;
    std::size_t n1 = m0 - of.size(), n0 = n1;
    while (n0 > 0 && std::isdigit(static_cast<unsigned char>(line[n0 - 1]))) --n0;
    if (n0 == n1) continue;
    ConfidenceEvidence e;
    e.failing_rows = std::stoll(line.substr(m0, end - m0));
    e.consistent_rows = std::stoll(line.substr(n0, n1 - n0));
    return e;
  }
  return std::nullopt;
}

Finding classify_recovery(const std::vector<RecoveredRow>& rows, const AttnParams& p) {
  Finding f;
  f.source = FindingSource::recovered_attention;
  auto say = [&](std::string name, std::vector<std::string> evidence) {
    f.name = std::move(name);
    f.evidence = std::move(evidence);
    // Classes that describe the weights without naming a cause are told with less confidence.
    if (f.name == "not_told") {
      f.confidence = Confidence::abstained;
      f.why = "the recovered attention does not tell";
    } else if (f.name == "weights_do_not_sum_right" || f.name == "weights_differ") {
      f.confidence = Confidence::medium;
      f.why = "the recovered weights describe the error, not its cause";
    } else if (const std::optional<ConfidenceEvidence> counted = rows_that_show_it(f.evidence)) {
      // The confidence comes from the count printed beside it: a minority of rows abstains.
      const ConfidenceRule rule = confidence_from(*counted);
      f.confidence = rule.confidence;
      f.why = rule.why;
      if (rule.confidence == Confidence::abstained) {
        f.evidence.insert(f.evidence.begin(), "Closest description, shown by a minority of the fitted rows: " + f.name + ".");
        f.name = "not_told";
      }
    } else {
      f.confidence = Confidence::high;
      f.why = "the recovered attention of every fitted row shows it";
    }
    return f;
  };
  if (rows.empty()) return say("not_told", {"no failing output row to fit (every output row is within its limit)"});
  const RecoveredRow& first = rows.front();
  const int n = static_cast<int>(first.candidates.size());
  if (!first.well_posed)
    return say("not_told", {std::to_string(n) + " candidate keys need at least " + std::to_string(2 * n) +
                            " dimensions for a well-posed fit; the case has " + std::to_string(p.head_size) +
                            " and the DUT runs no larger head size that fails"});
  FittedRows fit{p, {}, {}};
  int outside = 0;
  for (const RecoveredRow& r : rows)
    if (r.relative_residual > 0.05) ++outside;
    else {
      fit.rows.push_back(&r);
      fit.keys.push_back(differing_keys(r, weight_noise(p.dtype)));
    }
  std::ostringstream method;
  method << "fit: non-negative least squares over " << n << " candidate V rows in " << p.head_size << " dimensions, "
         << rows.size() << " failing row(s), residual " << first.relative_residual << " in the first";
  if (fit.rows.empty() || 2 * outside > static_cast<int>(rows.size())) {
    std::ostringstream o;
    o << "no non-negative combination of V rows gives " << query_name(first) << " (residual "
      << first.relative_residual << "; " << outside << " of " << rows.size()
      << " rows alike): the kernel does not compute a weighted average of the values it was given (values read "
         "from the wrong tensor or stride, or arithmetic on the output)";
    return say("output_outside_the_values", {o.str(), method.str()});
  }
  // The score semantics first: a wrong sink or cap scales every weight, which the key tests below
  // would read as keys dropped or added.
  for (auto* told : {&sink_finding, &softcap_finding})
    if (std::optional<Finding> x = (*told)(fit.rows, p)) {
      x->evidence.push_back(method.str());
      return *x;
    }
  auto keyed = [&](std::string name, bool extra, auto pred, std::string meaning) -> std::optional<Finding> {
    const auto [where, count] = fit.find(extra, pred);
    if (!where) return std::nullopt;
    return say(std::move(name), {attends(*fit.rows[where->first], where->second, p), fit.share(count) + ": " + meaning,
                                 method.str()});
  };
  const std::int64_t slots = ring_slots(p);
  if (fit.any_extra()) {
    if (auto x = keyed("cross_sequence_leak", true, [](const RecoveredRow& r, const AttentionCandidate& k) { return k.sequence != r.sequence; },
                       "keys of another sequence of the batch leak into this one (a window or offset over packed rows)"))
      return *x;
    if (auto x = keyed("wrong_kv_head", true, [&](const RecoveredRow& r, const AttentionCandidate& k) { return k.kv_head != own_kv_head(r, p); },
                       "a query head reads the values of another kv head (the GQA head mapping or a head stride)"))
      return *x;
    // Every extra key is the one the query's ring slot held, and the query's own key is missing.
    bool stale = slots > 0;
    for (std::size_t i = 0; stale && i < fit.rows.size(); ++i) {
      const RecoveredRow& r = *fit.rows[i];
      for (int c : fit.keys[i].extra) stale = stale && r.token - r.candidates[c].position == slots;
      if (!fit.keys[i].extra.empty())
        stale = stale && std::any_of(fit.keys[i].missing.begin(), fit.keys[i].missing.end(),
                                     [&](int c) { return r.candidates[c].position == r.token; });
    }
    if (stale)
      if (auto x = keyed("stale_slot_read", true, [](const RecoveredRow&, const AttentionCandidate&) { return true; },
                         "the kernel reads the query's ring slot before writing the query's K/V: it sees the key the slot "
                         "held (position t - " + std::to_string(slots) + ") instead of its own"))
        return *x;
    if (auto x = keyed("future_keys", true, [&](const RecoveredRow& r, const AttentionCandidate& k) {
          return p.band.right >= 0 && k.position > r.token + p.band.right; }, "keys after the window's upper edge are attended (a causal or right-window bound)"))
      return *x;
    if (auto x = keyed("keys_below_the_window", true, [&](const RecoveredRow& r, const AttentionCandidate& k) {
          return p.band.left >= 0 && r.token - k.position > p.band.left; }, "keys below the window's lower edge are attended"))
      return *x;
    if (auto x = keyed("extra_keys", true, [](const RecoveredRow&, const AttentionCandidate&) { return true; },
                       "keys the golden hides are attended"))
      return *x;
  }
  // A dropped key leaves the others renormalised (the weights still sum as the golden's); weights
  // that do not sum right are a normalisation fault, which only looks like keys gone missing.
  int sums_off = 0;
  for (const RecoveredRow* row : fit.rows) {
    double dut_sum = 0, golden_sum = 0;
    for (int c = 0; c < n; ++c) dut_sum += row->weights[c], golden_sum += row->golden[c];
    sums_off += std::abs(dut_sum - golden_sum) > 2 * weight_noise(p.dtype);
  }
  if (fit.any_missing() && sums_off * 2 <= static_cast<int>(fit.rows.size()) &&
      !scale_explains_missing(fit, fit_scale(fit), weight_noise(p.dtype))) {
    if (only_keys_before_the_chunk(fit)) {
      // Every key before the chunk lost, or only the last few before its boundary (kept older ones).
      const std::int64_t kept = kept_keys_before_the_chunk(fit);
      if (kept == 0) {
        if (auto x = keyed("chunk_prefix_dropped", false, [](const RecoveredRow&, const AttentionCandidate&) { return true; },
                           "rows of chunks after the first lose every key before their chunk's boundary: the chunk attends "
                           "itself and not the cache"))
          return *x;
      } else if (const std::int64_t lost = boundary_keys_lost(fit); lost > 0) {
        if (auto x = keyed("chunk_boundary_keys_dropped", false, [](const RecoveredRow&, const AttentionCandidate&) { return true; },
                           "rows of chunks after the first lose the last " + std::to_string(lost) + " key(s) before their "
                           "chunk's start and keep the older ones: the cache read stops short of the chunk boundary"))
          return *x;
      }
    }
    if (const DroppedBlock block = dropped_tile(fit, weight_noise(p.dtype)); block.alignment > 0) {
      const RecoveredRow& r = *fit.rows[block.row];
      std::ostringstream o;
      o << query_name(r) << " gives positions " << block.first << ".." << block.last << " (from " << block.first
        << ", a multiple of " << block.alignment << ", to its last key) no weight; the golden gives them";
      for (std::size_t c = 0; c < r.candidates.size(); ++c)
        if (is_own(r.candidates[c], r, p) && r.candidates[c].position >= block.first && r.candidates[c].position <= block.last)
          o << " " << r.golden[c];
      return say("key_tile_dropped",
                 {o.str(), fit.share(static_cast<int>(std::count_if(fit.keys.begin(), fit.keys.end(), [](const KeyDifferences& k) { return !k.missing.empty(); }))) +
                               ": each row loses one block of keys that starts at a multiple of " + std::to_string(block.alignment) +
                               " and runs to its last key: the kernel skips its last key tile (tiles of " +
                               std::to_string(block.alignment) + " keys or a divisor; a tile count rounded down)",
                  method.str()});
    }
    bool own_in_every_row = true;
    for (std::size_t i = 0; i < fit.rows.size(); ++i)
      if (!fit.keys[i].missing.empty())
        own_in_every_row = own_in_every_row && std::any_of(fit.keys[i].missing.begin(), fit.keys[i].missing.end(), [&](int c) {
                             return fit.rows[i]->candidates[c].position == fit.rows[i]->token && is_own(fit.rows[i]->candidates[c], *fit.rows[i], p);
                           });
    if (own_in_every_row)
      if (auto x = keyed("own_key_dropped", false, [](const RecoveredRow& r, const AttentionCandidate& k) { return k.position == r.token; },
                         "the query's own key is left out (a strict < where <= belongs)"))
        return *x;
    if (auto x = keyed("keys_dropped", false, [](const RecoveredRow&, const AttentionCandidate&) { return true; },
                       "keys the golden attends are left out"))
      return *x;
  }
  // The right keys, weighed differently.
  if (const std::int64_t tile = rescaled_tile(fit)) {
    std::ostringstream o;
    o << "within aligned blocks of " << tile << " keys the DUT's weights are the golden's times one factor, and the "
      << "factor changes from block to block: an online softmax that does not rescale its accumulator by exp(m_old - "
         "m_new) when a later key tile raises the running max (tiles of "
      << tile << " keys or a divisor of it)";
    return say("tile_rescale_missing", {o.str(), method.str()});
  }
  const RecoveredRow& r = *fit.rows.front();
  // A row whose recovered weights sum to nothing is the weighting of no key: it found no normalisation.
  const int weightless = static_cast<int>(std::count_if(fit.rows.begin(), fit.rows.end(), [&](const RecoveredRow* row) {
    return std::accumulate(row->weights.begin(), row->weights.end(), 0.0) <= 2 * weight_noise(p.dtype);
  }));
  if (sums_off * 2 > static_cast<int>(fit.rows.size()) && weightless * 2 >= static_cast<int>(fit.rows.size()))
    return say("not_told", {std::to_string(weightless) + " of the " + std::to_string(fit.rows.size()) + " fitted rows are "
                            "given by no weighting of the keys (their recovered weights sum to about 0): the rows are "
                            "(nearly) zero, not a weighted average of their keys", method.str()});
  if (sums_off * 2 > static_cast<int>(fit.rows.size())) {
    double dut_sum = 0, golden_sum = 0;
    for (int c = 0; c < n; ++c) dut_sum += r.weights[c], golden_sum += r.golden[c];
    std::ostringstream o;
    o << query_name(r) << ": the DUT's weights sum to " << dut_sum << ", the golden's to " << golden_sum
      << (golden_sum < 0.999 ? " (the rest is the sink's)" : "") << "; " << sums_off << " of " << fit.rows.size()
      << " fitted rows alike";
    std::string meaning = "the normalisation is wrong (a denominator missing a tile or the sink, or one too many)";
    if (!p.sinks && dut_sum < golden_sum)
      meaning = "a share of the softmax's mass went to no V row: the denominator has terms with no value (padding "
                "keys past the sequence scored, or a sink where there is none)";
    return say("weights_do_not_sum_right", {o.str(), meaning, method.str()});
  }
  const ScaleFit scale_fit = fit_scale(fit);
  const double slope = scale_fit.slope, m = scale_fit.keys;
  const int widest = scale_fit.widest;
  // Two keys give one ratio, which any slope fits: a slope needs rows of at least three weighed keys.
  if (std::abs(slope) > 0.05 && widest < 3)
    return say("not_told", {query_name(r) + ": the weights follow the golden scores with slope " + std::to_string(1 + slope) +
                            ", but no fitted row weighs more than " + std::to_string(widest) + " keys: too few to tell a "
                            "scale from a cap, a sink or a key too many (rerun on a case whose rows see more keys)",
                            method.str()});
  if (std::abs(slope) > 0.05 && scale_fit.rms <= 0.05) {
    std::ostringstream o;
    o << "over " << fit.rows.size() << " fitted rows (" << static_cast<int>(m) << " weighed keys) the DUT's log-weights "
      << "follow the golden scores with slope " << 1 + slope << ": it scales the scores by " << 1 + slope
      << " x the golden's scale " << p.scale << " (that is " << (1 + slope) * p.scale << ")";
    return say("wrong_scale", {o.str(), method.str()});
  }
  if (const int bits = p.dtype == DType::fp32 ? quantised_bits(fit) : 0) {
    std::ostringstream o;
    o << "in every fitted row every sizeable weight, relative to the row's largest, has a significand of " << bits
      << " bits: the probabilities were rounded to a " << bits << "-bit type before P.V"
      << (bits == 8 ? " (bf16)" : bits == 11 ? " (fp16)" : bits <= 4 ? " (fp8)" : "");
    return say("quantised_probabilities", {o.str(), method.str()});
  }
  int worst = 0;
  for (int c = 0; c < n; ++c)
    if (std::abs(r.weights[c] - r.golden[c]) > std::abs(r.weights[worst] - r.golden[worst])) worst = c;
  // The weights differ and nothing above names why: a description, not a cause. Precision would
  // have been reproduced by a rounding reading, so it is not offered as the cause either.
  return say("not_told", {"the DUT weighs the right keys, with weights that differ from the golden's; the largest "
                          "difference: " + attends(r, worst, p) + ". No measurement here names why",
                          method.str()});
}

}  // namespace swa::harness
