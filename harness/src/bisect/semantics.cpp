#include "semantics.hpp"
#include "fp8_codes.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "swa/dtype.hpp"
#include "swa/kv_format.hpp"

namespace swa::harness {
namespace {

// Keys weighed enough that their log-weight is measured, not noise.
constexpr double kWeighed = 0.01;

struct Implied {
  double sink = 0;     // the implied sink logit (-inf: no mass left out)
  double spread = 0;   // max - min of the per-key estimates: the scores themselves disagree when large
  int keys = 0;
};

// w_j = exp(s_j) / (sum_k exp(s_k) + exp(sink)) for a kernel whose scores are right: the mass left
// out, 1 - sum w, is exp(sink) / Z, so sink = s_j + log((1 - sum w) / w_j) for every weighed key j.
std::optional<Implied> implied_sink(const RecoveredRow& r) {
  double sum = 0;
  for (double w : r.weights) sum += w;
  Implied m;
  if (sum >= 1 - 1e-4) {
    m.sink = -INFINITY;
    return m;
  }
  double lo = INFINITY, hi = -INFINITY, total = 0;
  for (std::size_t c = 0; c < r.weights.size(); ++c)
    if (r.weights[c] > kWeighed && std::isfinite(r.scores[c])) {
      const double x = r.scores[c] + std::log((1 - sum) / r.weights[c]);
      lo = std::min(lo, x), hi = std::max(hi, x), total += x, ++m.keys;
    }
  if (m.keys < 2) return std::nullopt;
  m.sink = total / m.keys;
  m.spread = hi - lo;
  return m;
}

bool near(double a, double b) { return std::abs(a - b) <= 0.03 + 2e-3 * std::abs(b); }

std::string fmt(double x) {
  std::ostringstream o;
  o.precision(4);
  o << x;
  return o.str();
}

}  // namespace

std::optional<Finding> sink_finding(const std::vector<const RecoveredRow*>& rows, const AttnParams& p) {
  if (!p.sinks || rows.empty()) return std::nullopt;
  // Per fitted row: which reading of the sinks its implied sink matches.
  std::map<std::string, int> votes;
  std::map<int, int> head_map;  // q head -> the head whose sink it implies (wrong-head rows)
  std::string example;
  int told = 0;
  for (const RecoveredRow* r : rows) {
    const auto m = implied_sink(*r);
    if (!m || m->spread > 0.1) continue;
    ++told;
    const double own = p.sinks[r->q_head];
    std::string reading;
    int other = -1;
    if (!std::isfinite(m->sink)) reading = "none";
    else if (near(m->sink, own)) reading = "own";
    else if (near(m->sink, own * p.scale)) reading = "scaled";
    else if (p.softcap > 0 && near(m->sink, p.softcap * std::tanh(own / p.softcap))) reading = "capped";
    // The sink's term k times in the denominator: sink + ln k (a sink seeding every split's or lane's
    // state, the parts merged without taking it out again). Only within a quarter of the gap to
    // ln(k +- 1): past a few dozen, any offset would be near some ln k.
    else if (const double k = std::round(std::exp(m->sink - own));
             k >= 2 && k <= 256 && std::abs(m->sink - own - std::log(k)) <= 0.25 * std::log((k + 1) / k))
      reading = "counted " + std::to_string(static_cast<long>(k));
    else {
      for (int h = 0; h < p.heads_q && other < 0; ++h)
        if (h != r->q_head && near(m->sink, p.sinks[h])) other = h;
      reading = other >= 0 ? "other head" : "other value";
    }
    if (other >= 0) head_map[r->q_head] = other;
    if (votes[reading]++ == 0 && example.empty() && reading != "own") {
      std::ostringstream o;
      o << "query " << r->token << " of sequence " << r->sequence << " (head " << r->q_head << "): its weights leave out "
        << "mass for a sink logit of ";
      if (std::isfinite(m->sink)) o << fmt(m->sink) << " (from " << m->keys << " keys, spread " << fmt(m->spread) << ")";
      else o << "-inf: they sum to 1, no mass is left for a sink";
      o << "; its own sink is " << fmt(own);
      if (other >= 0) o << ", head " << other << "'s is " << fmt(p.sinks[other]);
      example = o.str();
    }
  }
  if (told == 0 || votes["own"] == told) return std::nullopt;
  const auto& [reading, count] = *std::max_element(votes.begin(), votes.end(),
                                                   [](const auto& a, const auto& b) { return a.second < b.second; });
  if (reading == "own") return std::nullopt;
  std::ostringstream share;
  share << count << " of " << told << " fitted rows imply the same reading of the sinks";
  const Confidence c = count * 10 >= told * 9 ? Confidence::high : Confidence::medium;
  if (reading == "none")
    return Finding{"sink_left_out", FindingSource::recovered_attention,
                   {example, share.str() + ": the weights sum to 1, so the sink is not in the softmax's denominator"}, c,
                   share.str()};
  if (reading == "scaled")
    return Finding{"sink_scaled", FindingSource::recovered_attention,
                   {example, share.str() + ": the implied sink is the head's sink times the score scale " + fmt(p.scale) +
                                 " (a sink is a logit: it is not scaled)"},
                   c, share.str()};
  if (reading == "capped")
    return Finding{"sink_capped", FindingSource::recovered_attention,
                   {example, share.str() + ": the implied sink is softcap * tanh(sink / softcap) (dut_v2.h: the sink is not "
                                           "capped)"},
                   c, share.str()};
  if (reading.rfind("counted ", 0) == 0) {
    const std::string k = reading.substr(8);
    return Finding{"sink_counted_" + k + "_times", FindingSource::recovered_attention,
                   {example, share.str() + ": the implied sink is the head's sink + ln " + k + ": its term e^sink is in the "
                                           "softmax's denominator " + k + " times (a sink seeding each of " + k +
                                           " splits' or lanes' states, merged without taking it out again)"},
                   c, share.str()};
  }
  if (reading == "other head") {
    std::ostringstream map, rule;
    bool kv = true, next = true;
    const int group = p.heads_q / std::max(1, p.heads_kv);
    for (const auto& [h, o] : head_map) {
      map << (map.tellp() > 0 ? ", " : "") << "head " << h << " -> head " << o << "'s";
      kv = kv && o == h / group;
      next = next && o == (h + 1) % p.heads_q;
    }
    if (head_map.size() < 2) rule << " (one failing head: the index rule cannot be told from this case)";
    else if (kv) rule << ": in every one the sink index is the kv head (h / " << group << ")";
    else if (next) rule << ": in every one the sink index is h + 1";
    return Finding{"sink_wrong_head", FindingSource::recovered_attention,
                   {example, share.str() + ": each row's weights imply another query head's sink (" + map.str() + ")" +
                                 rule.str()},
                   c, share.str()};
  }
  return Finding{"sink_wrong", FindingSource::recovered_attention,
                 {example, share.str() + ": the implied sink is none of the head's sink, another head's, the sink scaled "
                                         "or capped, or no sink"},
                 Confidence::medium, "the implied sink matches no reading of the sinks"};
}

std::optional<Finding> softcap_finding(const std::vector<const RecoveredRow*>& rows, const AttnParams& p) {
  if (!(p.softcap > 0) || rows.empty()) return std::nullopt;
  const double cap = p.softcap, scale = p.scale;
  using Curve = double (*)(double raw, double cap, double scale);
  struct Reading {
    const char* name;
    const char* words;
    Curve f;
  };
  static const Reading readings[] = {
      {"capped", "cap * tanh(scale * q.k / cap), the golden's", [](double x, double c, double) { return c * std::tanh(x / c); }},
      {"uncapped", "scale * q.k, no cap", [](double x, double, double) { return x; }},
      {"cap_before_scale", "scale * cap * tanh(q.k / cap): the cap applied before the scale",
       [](double x, double c, double s) { return s * c * std::tanh(x / s / c); }},
  };
  // Per reading, the RMS of log w_j - f(raw_j) - c_row over weighed keys, c_row each row's mean.
  std::vector<double> sq(std::size(readings), 0.0);
  double worst_golden = 0, worst_at = 0;
  int keys = 0;
  for (const RecoveredRow* r : rows) {
    std::vector<std::pair<double, double>> points;  // raw score, log weight
    for (std::size_t c = 0; c < r->weights.size(); ++c)
      if (r->weights[c] > kWeighed && std::isfinite(r->scores[c]) && std::abs(r->scores[c]) < 0.999 * cap)
        points.push_back({cap * std::atanh(r->scores[c] / cap), std::log(r->weights[c])});
    if (points.size() < 3) continue;
    keys += static_cast<int>(points.size());
    for (std::size_t k = 0; k < std::size(readings); ++k) {
      double mean = 0;
      for (const auto& [x, y] : points) mean += y - readings[k].f(x, cap, scale);
      mean /= static_cast<double>(points.size());
      for (const auto& [x, y] : points) {
        const double d = y - readings[k].f(x, cap, scale) - mean;
        sq[k] += d * d;
        if (k == 0 && std::abs(d) > worst_golden) worst_golden = std::abs(d), worst_at = x / cap;
      }
    }
  }
  if (keys < 6) return std::nullopt;
  std::vector<double> rms(sq.size());
  for (std::size_t k = 0; k < sq.size(); ++k) rms[k] = std::sqrt(sq[k] / keys);
  std::ostringstream table;
  table << "log-weight residual (RMS over " << keys << " weighed keys) against each score -> weight curve:";
  for (std::size_t k = 0; k < rms.size(); ++k) table << " " << readings[k].name << " " << fmt(rms[k]) << ";";
  // The weights follow the capped curve to within what the output's dtype lets a fit recover: the
  // cap is right.
  const double follows = p.dtype == DType::fp32 ? 2e-4 : p.dtype == DType::fp16 ? 5e-3 : 2e-2;
  if (rms[0] < follows) return std::nullopt;
  const std::size_t best = static_cast<std::size_t>(std::min_element(rms.begin(), rms.end()) - rms.begin());
  if (best != 0 && rms[best] < 0.02 && rms[best] * 4 < rms[0]) {
    const std::string name = best == 1 ? "softcap_ignored" : "softcap_before_scale";
    return Finding{name, FindingSource::recovered_attention,
                   {std::string("the weights follow ") + readings[best].words + ", not the golden's curve", table.str()},
                   Confidence::high, "one curve fits the weights and the others do not"};
  }
  std::ostringstream o;
  o << "the weights follow none of the curves: they leave the capped curve by up to " << fmt(worst_golden)
    << " in log-weight, at scale * q.k / cap = " << fmt(worst_at)
    << " (an approximation of tanh, or the cap applied in another way)";
  return Finding{"softcap_curve_wrong", FindingSource::recovered_attention, {o.str(), table.str()}, Confidence::medium,
                 "the weights leave the capped curve, but no known reading of the cap fits"};
}

namespace {

enum class Rounding { nearest_even, nearest_away, toward_zero };

// x rounded to an FP8 value of `f` by `mode`, saturating at the largest finite value.
double fp8_round(KvFormat f, double x, Rounding mode) {
  if (!std::isfinite(x)) return fp8_decode(f, fp8_encode(f, x));
  const double largest = fp8_max(f), a = std::min(std::abs(x), largest);
  const double even = std::abs(fp8_decode(f, fp8_encode(f, a)));
  if (even == a || mode == Rounding::nearest_even) return std::copysign(even, x);
  // The two FP8 magnitudes around a: `even` is one of them; the code next to it is the other.
  const std::uint8_t code = fp8_encode(f, a);
  const double other = even > a ? std::abs(fp8_decode(f, static_cast<std::uint8_t>(code - 1)))
                                 : std::abs(fp8_decode(f, static_cast<std::uint8_t>(code + 1)));
  const double lo = std::min(even, other), hi = std::max(even, other);
  double r = even;
  if (mode == Rounding::toward_zero) r = lo;
  else if (a - lo == hi - a) r = hi;  // nearest, ties away from zero
  return std::copysign(r, x);
}

struct Fp8Reading {
  Rounding rounding = Rounding::nearest_even;
  bool store_k = false;        // V stored (encoded) with K's descale
  bool read_k = false;         // V read back (decoded) with K's descale
  bool other_format = false;   // e4m3 for e5m2 or the reverse
  bool inverted = false;       // fp8(x * d) / d instead of fp8(x / d) * d
  bool raw = false;            // no FP8 round trip at all: x itself
  int changes() const { return raw ? 1 : (rounding != Rounding::nearest_even) + store_k + read_k + other_format + inverted; }
  std::string words(KvFormat f) const {
    if (raw) return "reads V without the FP8 round trip (unquantised)";
    std::vector<std::string> w;
    if (rounding == Rounding::toward_zero) w.push_back("rounds toward zero (truncates) instead of to nearest even");
    if (rounding == Rounding::nearest_away) w.push_back("rounds ties away from zero instead of to even");
    if (store_k && read_k) w.push_back("quantises V with k_descale instead of v_descale");
    else if (store_k) w.push_back("encodes V with k_descale (and reads it back with v_descale)");
    else if (read_k) w.push_back("reads V back with k_descale (it was encoded with v_descale)");
    if (other_format) w.push_back(std::string("uses ") + (f == KvFormat::fp8_e4m3 ? "e5m2" : "e4m3") + " for the cache's " +
                                  (f == KvFormat::fp8_e4m3 ? "e4m3" : "e5m2"));
    if (inverted) w.push_back("applies the descale the wrong way round: fp8(x * d) / d instead of fp8(x / d) * d");
    std::string o;
    for (std::size_t i = 0; i < w.size(); ++i) o += (i ? ", and " : "") + w[i];
    return o;
  }
  std::string name() const {
    if (raw) return "fp8_not_applied";
    if (store_k && read_k && changes() == 2) return "fp8_v_with_k_descale";
    if (changes() != 1) return "fp8_values_wrong";
    if (rounding == Rounding::toward_zero) return "fp8_rounds_toward_zero";
    if (rounding == Rounding::nearest_away) return "fp8_rounds_ties_away";
    if (read_k) return "fp8_v_read_with_k_descale";
    if (store_k) return "fp8_v_stored_with_k_descale";
    if (other_format) return "fp8_other_format";
    return "fp8_descale_inverted";
  }
};

// A one-key row's output read as the FP8 codes of its V (the code whose value times v_descale, in the
// output's dtype, is the element), beside the codes the spec's encoder gives: what the codec fit reads.
CacheMismatch codes_read_back(const AttnParams& p, const float* v, const double* o, int head) {
  CacheMismatch m;
  m.held_kind = CacheMismatch::Held::no_position;
  for (int x = 0; x < p.head_size; ++x) {
    const double encoded = v[x] / static_cast<double>(p.v_descale);
    const std::uint8_t want = fp8_encode(p.kv_format, encoded), near = fp8_encode(p.kv_format, static_cast<float>(v[x] / p.v_descale));
    int got = -1;
    for (int c = 0; c < 256 && got < 0; ++c)
      if (round_to(p.dtype, static_cast<float>(fp8_decode(p.kv_format, static_cast<std::uint8_t>(c)) * p.v_descale)) == o[x]) got = c;
    if (got < 0) continue;  // no code gives it: not a value read back
    const auto g = static_cast<std::uint8_t>(got);
    const bool same = round_to(p.dtype, static_cast<float>(fp8_decode(p.kv_format, g) * p.v_descale)) ==
                      round_to(p.dtype, static_cast<float>(fp8_decode(p.kv_format, want) * p.v_descale));
    m.codes.push_back({true, head, x, encoded, want, same ? want : g, !same && g != near});
  }
  return m;
}

}  // namespace

std::optional<Finding> fp8_value_finding(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                         const std::vector<double>& row_limit) {
  const AttnParams& p = pr.params;
  if (!is_fp8(p.kv_format) || p.sinks || pr.v.empty()) return std::nullopt;  // a sink takes part of a one-key row
  std::vector<Fp8Reading> readings;
  for (Rounding rounding : {Rounding::nearest_even, Rounding::nearest_away, Rounding::toward_zero})
    for (bool store_k : {false, true})
      for (bool read_k : {false, true})
        for (bool other : {false, true})
          for (bool inverted : {false, true}) readings.push_back({rounding, store_k, read_k, other, inverted, false});
  readings.push_back({Rounding::nearest_even, false, false, false, false, true});
  std::vector<bool> fits(readings.size(), true);
  std::vector<CacheMismatch> read_codes;  // each one-key row's V as codes read back, for the codec fit
  const int d = p.head_size, hkv = p.heads_kv;
  int rows = 0, failing_elsewhere = 0, single_passing = 0;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t) {
      const std::size_t row = static_cast<std::size_t>(pr.seq_offsets[b] + t);
      const bool single = band_end_key(p.band, t, p.seq_lens[b]) - band_first_key(p.band, t) == 1;
      for (int h = 0; h < p.heads_q; ++h) {
        const double* o = &out[(row * p.heads_q + h) * d];
        const double* g = &ref[(row * p.heads_q + h) * d];
        double error = 0;
        for (int x = 0; x < d; ++x) error = std::max(error, std::abs(o[x] - g[x]));
        if (!(error > row_limit[row])) {
          single_passing += single;
          continue;
        }
        if (!single) {
          ++failing_elsewhere;
          continue;
        }
        ++rows;
        const std::int64_t key = band_first_key(p.band, t);
        const float* v = &pr.v[(static_cast<std::size_t>(pr.seq_offsets[b] + key) * hkv + kv_head_for(h, p.heads_q, hkv)) * d];
        read_codes.push_back(codes_read_back(p, v, o, h));
        for (std::size_t c = 0; c < readings.size(); ++c) {
          if (!fits[c]) continue;
          const Fp8Reading& r = readings[c];
          const KvFormat f = r.other_format ? (p.kv_format == KvFormat::fp8_e4m3 ? KvFormat::fp8_e5m2 : KvFormat::fp8_e4m3)
                                            : p.kv_format;
          const double ws = r.store_k ? p.k_descale : p.v_descale, rs = r.read_k ? p.k_descale : p.v_descale;
          for (int x = 0; x < d && fits[c]; ++x) {
            const double value = r.raw ? v[x] : r.inverted ? fp8_round(f, v[x] * ws, r.rounding) / rs : fp8_round(f, v[x] / ws, r.rounding) * rs;
            const double want = round_to(p.dtype, static_cast<float>(value));
            fits[c] = o[x] == want || (std::isnan(o[x]) && std::isnan(want));
          }
        }
      }
    }
  if (rows == 0) {
    if (single_passing == 0 || failing_elsewhere == 0) return std::nullopt;
    // A row that sees one key sees its own: in a chunk or a decode step that is the call's own K/V row,
    // not one read back from the cache, so a right output there says nothing of the cache's V (batch E's
    // fault 20 read cached V with k_descale while every one-key row passed).
    if (p.mode != RunMode::prefill) return std::nullopt;
    return Finding{"fp8_keys_wrong", FindingSource::value_storage,
                   {std::to_string(single_passing) + " row(s) that see a single key output its V exactly as the golden's "
                    "FP8 reads it (V is quantised and descaled right), while " + std::to_string(failing_elsewhere) +
                    " rows that see several keys fail: the error is in the scores (K's quantisation or descale)"},
                   Confidence::medium, "V is read right; K cannot be read off a one-key row"};
  }
  std::vector<std::size_t> matching;
  for (std::size_t c = 1; c < readings.size(); ++c)
    if (fits[c]) matching.push_back(c);
  std::ostringstream e;
  e << rows << " failing row(s) see a single key, so their output is that key's V as the DUT reads it; ";
  if (matching.empty()) {
    // The codes the DUT read V from, fitted as an encoder (a region where they differ, a rule there).
    if (std::optional<Finding> codec = fit_fp8_codes(read_codes, p)) {
      codec->source = FindingSource::value_storage;
      codec->evidence.insert(codec->evidence.begin(), e.str() + "read as FP8 codes (the output over v_descale), they are V's "
                                                          "codes but where the encoder differs:");
      return codec;
    }
    e << "it matches no reading of the FP8 spec (rounding, descale, format, descale direction) nor the golden's";
    return Finding{"fp8_values_wrong", FindingSource::value_storage, {e.str()}, Confidence::medium,
                   "the values are wrong in a way no reading of the FP8 spec gives"};
  }
  std::stable_sort(matching.begin(), matching.end(),
                   [&](std::size_t a, std::size_t b) { return readings[a].changes() < readings[b].changes(); });
  const Fp8Reading& best = readings[matching.front()];
  e << "in every one it is the golden's reading except that the DUT " << best.words(p.kv_format);
  std::vector<std::string> evidence = {e.str()};
  const bool alone = matching.size() == 1 || readings[matching[1]].changes() > best.changes();
  if (!alone) {
    std::string others;
    for (std::size_t i = 1; i < matching.size() && readings[matching[i]].changes() == best.changes(); ++i)
      others += (others.empty() ? "" : "; ") + readings[matching[i]].words(p.kv_format);
    evidence.push_back("these rows fit equally: " + others + " (a case with other descales or values tells them apart)");
  }
  return Finding{best.name(), FindingSource::value_storage, evidence, alone ? Confidence::high : Confidence::medium,
                 alone ? "one reading of the FP8 spec fits every single-key row" : "several readings fit the single-key rows"};
}

std::optional<Finding> dims_finding(const AttnParams& p, const std::vector<double>& out, const std::vector<double>& ref,
                                    const std::vector<double>& row_limit) {
  const int d = p.head_size;
  std::vector<bool> failing(static_cast<std::size_t>(d), false);
  std::int64_t rows = 0, zeros = 0, elements = 0;
  for (std::size_t row = 0; row < row_limit.size(); ++row)
    for (int h = 0; h < p.heads_q; ++h) {
      const double* o = &out[(row * p.heads_q + h) * d];
      const double* g = &ref[(row * p.heads_q + h) * d];
      bool any = false;
      for (int x = 0; x < d; ++x)
        if (!(std::abs(o[x] - g[x]) <= row_limit[row])) {
          failing[x] = any = true;
          ++elements;
          zeros += o[x] == 0;
        }
      rows += any;
    }
  const auto first = std::find(failing.begin(), failing.end(), true);
  if (rows < 2 || first == failing.end()) return std::nullopt;
  const auto last = std::find(failing.rbegin(), failing.rend(), true);
  const int lo = static_cast<int>(first - failing.begin()), hi = d - 1 - static_cast<int>(last - failing.rbegin());
  if (hi - lo + 1 == d || std::find(failing.begin() + lo, failing.begin() + hi + 1, false) != failing.begin() + hi + 1)
    return std::nullopt;  // every dim, or not one block
  std::ostringstream o;
  o << "in all " << rows << " failing rows only dims " << lo << ".." << hi << " of " << d
    << " exceed the limit; dims outside that block match the golden";
  std::string what = zeros == elements ? "the DUT writes 0 there: those dims are not computed or not written"
                                       : "the DUT's values there are wrong: those dims are read or computed apart";
  if (lo > 0 && hi == d - 1 && lo % 16 == 0)
    what += " (the tail past dim " + std::to_string(lo) + ", a multiple of " + std::to_string(lo & -lo) +
            ": a head-size loop or tile that stops short)";
  return Finding{"head_dims_wrong", FindingSource::value_storage, {o.str(), what}, Confidence::high,
                 "the failing dims form one block, the same in every failing row"};
}

}  // namespace swa::harness
