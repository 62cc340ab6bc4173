// bisect: reproduce, localize, diagnose, reduce, emit.
#include "swa/harness/bisect/bisect.hpp"

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "ablation.hpp"
#include "band.hpp"
#include "cache_finding.hpp"
#include "finding.hpp"
#include "judgement.hpp"
#include "recover.hpp"
#include "semantics.hpp"
#include "swa/baseline.hpp"
#include "swa/golden.hpp"
#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/judge/evaluate.hpp"
#include "swa/harness/judge/verdict.hpp"
#include "swa/harness/case/problem_file.hpp"
#include "swa/harness/base/join.hpp"
#include "swa/harness/judge/metrics.hpp"

namespace fs = std::filesystem;

namespace swa::harness {
namespace {

std::optional<std::vector<double>> run_named_dut(const std::string& name, const DutOptions& options, const Problem& pr,
                                                 std::string& error) {
  auto dut = make_dut(name, options);
  return run_to_output(*dut, pr, &error);
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(a[i] - b[i]);
    if (!std::isfinite(e)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, e);
  }
  return worst;
}

// The DUT's output against a variant's: elements non-finite in both the same way (both NaN, or the
// same infinity) agree; non-finite in one only is an infinite difference. So a NaN output can be
// explained only by a variant that is NaN exactly there, never by an infinite "difference".
double difference_to_variant(const std::vector<double>& out, const std::vector<double>& variant) {
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double a = out[i], b = variant[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      const bool same = (std::isnan(a) && std::isnan(b)) || a == b;
      if (!same) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::abs(a - b));
  }
  return worst;
}

// One run of the DUT on a scenario for bisect: its output, the reference it is held to, the threshold.
struct BisectRun {
  std::unique_ptr<Reference> reference;  // the problem, the golden and the baseline
  dut::Traits traits;                    // what the DUT says of itself
  std::vector<double> ref, out;
  double threshold = 0, max_abs = 0;     // the whole output's max-abs limit (variants), the DUT's error
  std::vector<double> row_limit;         // per token row: its phase's max-abs limit, as the run's verdict
  bool fails = false;
  bool output_fails = false;             // the outputs fail (not only the KV cache)
  std::string reason;  // the verdict's reason, when it fails
  std::string error;   // the DUT could not run
  std::vector<CacheMismatch> cache_details;
};

// Each token row's max-abs limit: its phase's, as judge() sets it (verdict.hpp); a profile without
// the max-abs check gives none.
std::vector<double> row_limits(const Scenario& s, const Reference& ref) {
  const AttnParams& p = ref.problem.params;
  std::vector<double> limit(static_cast<std::size_t>(total_tokens(p)), std::numeric_limits<double>::infinity());
  const std::vector<Phase> phases = phases_of(p);
  if (s.tolerance.rtol_factor <= 0 || ref.baseline_errors.phases.size() != phases.size()) return limit;
  for (std::size_t k = 0; k < phases.size(); ++k)
    for (std::int64_t row : phases[k].rows)
      limit[static_cast<std::size_t>(row)] = s.tolerance.rtol_factor * ref.baseline_errors.phases[k].max_abs + s.tolerance.atol_floor;
  return limit;
}

BisectRun evaluate_case(const Scenario& s, const BisectOptions& o) {
  BisectRun e;
  e.reference = std::make_unique<Reference>(s);
  const Reference& ref = *e.reference;
  const Problem& pr = ref.problem;
  e.threshold = s.tolerance.rtol_factor * compare(ref.baseline(), ref.golden.out, s.dtype, 0).max_abs + s.tolerance.atol_floor;
  auto dut = make_dut(o.dut, o.dut_options);
  e.traits = dut->traits();
  if (o.against == "golden") {
    // The run's own evaluation: the same verdict (per phase, worst element and relative L2) and the
    // same KV cache check, so what failed in a run fails here.
    Evaluation ev = evaluate(s, ref, *dut, o.dut, s.tolerance, s.cache_check, /*cache_details=*/512);
    if (ev.out.empty()) {
      e.error = (ev.row.status == Verdict::skip ? "skipped: " : "") + ev.row.reason;
      return e;
    }
    e.ref = ref.golden.out;
    e.out.assign(ev.out.begin(), ev.out.end());
    e.fails = is_failure(ev.row.status);
    e.output_fails = is_failure(ev.output_status);
    e.cache_details = std::move(ev.cache_details);
    e.row_limit = row_limits(s, ref);
    if (e.fails) e.reason = ev.row.reason;
  } else {
    // Against another DUT its output is the reference and the worst element decides.
    auto other = run_named_dut(o.against, o.dut_options, pr, e.error);
    if (!other) {
      e.error = "the reference DUT " + o.against + " failed: " + e.error;
      return e;
    }
    e.ref = *other;
    auto out = run_to_output(*dut, pr, &e.error);
    if (!out) return e;
    e.out = *out;
  }
  e.max_abs = max_abs_difference(e.out, e.ref);
  if (o.against != "golden") {
    e.fails = e.output_fails = !(e.max_abs <= e.threshold);
    e.row_limit.assign(static_cast<std::size_t>(total_tokens(pr.params)), e.threshold);
    if (e.fails) e.reason = "max abs difference " + std::to_string(e.max_abs) + " over " + std::to_string(e.threshold);
  }
  return e;
}

// The sequence holding the largest error (the first non-finite one wins).
int worst_sequence(const BisectRun& e) {
  const Problem& pr = e.reference->problem;
  const std::int64_t row = static_cast<std::int64_t>(pr.params.heads_q) * pr.params.head_size;
  int worst_seq = 0;
  double worst = -1;
  for (int b = 0; b < pr.params.batch; ++b)
    for (std::int64_t i = pr.seq_offsets[b] * row; i < pr.seq_offsets[b + 1] * row; ++i) {
      const double err = std::abs(e.out[i] - e.ref[i]);
      if (!std::isfinite(err) || err > worst) {
        if (worst == std::numeric_limits<double>::infinity()) break;
        worst = std::isfinite(err) ? err : std::numeric_limits<double>::infinity();
        worst_seq = b;
      }
    }
  return worst_seq;
}

// One ablated case, judged as the run judges.
AblationRun ablated(const Scenario& s, const BisectOptions& o) {
  const BisectRun e = evaluate_case(s, o);
  if (!e.error.empty()) return {AblationOutcome::not_run, e.error};
  if (!e.fails) return {AblationOutcome::passes, {}};
  return {e.output_fails ? AblationOutcome::fails : AblationOutcome::fails_cache_only, e.reason};
}

struct Diagnosis {
  std::vector<std::pair<double, std::string>> ranked;  // error of the DUT against each variant
  std::vector<std::string> silent;  // variants whose output passes here: they cannot explain a failure
  std::string best;
  bool explained = false;
};

// A variant explains the DUT when the difference is at the baseline-level threshold, or under 1% of
// the DUT's own error (a threshold of ~0, e.g. W = 1 where the baseline is exact, must not hide it).
// An infinite difference never explains, and a non-finite DUT error gives no 1% allowance (1% of
// infinity once let every variant "match" a NaN output, the first alphabetically winning).
bool explains(double difference, const BisectRun& e) {
  const double allowance = std::isfinite(e.max_abs) ? 1e-2 * e.max_abs : 0.0;
  return std::isfinite(difference) && difference <= std::max(e.threshold, allowance);
}

Diagnosis diagnose(const BisectRun& e) {
  Diagnosis d;
  for (const Variant& v : bisect_variants())
    if (auto out = v.output(e.reference->problem)) {
      if (max_abs_difference(*out, e.ref) <= e.threshold)
        d.silent.push_back(v.name);  // as right as a correct kernel on this case (a correct output matches it)
      else
        d.ranked.push_back({difference_to_variant(e.out, *out), v.name});
    }
  std::sort(d.ranked.begin(), d.ranked.end());
  if (!d.ranked.empty()) {
    d.best = d.ranked.front().second;
    d.explained = explains(d.ranked.front().first, e);
  }
  return d;
}

// Where the DUT's output stops being a number: counts, the first non-finite element in memory order,
// and how many keys its row sees (a row with none, fully masked, is where a naive softmax makes 0/0).
// Empty when every element is finite.
std::string non_finite_summary(const Scenario& s, const BisectRun& e) {
  const Problem& pr = e.reference->problem;
  const AttnParams& p = pr.params;
  std::int64_t nans = 0, infs = 0, first = -1;
  for (std::size_t i = 0; i < e.out.size(); ++i) {
    if (std::isfinite(e.out[i])) continue;
    (std::isnan(e.out[i]) ? nans : infs) += 1;
    if (first < 0) first = static_cast<std::int64_t>(i);
  }
  if (first < 0) return {};
  const std::int64_t row = first / (static_cast<std::int64_t>(s.heads) * s.head_size);
  const int head = static_cast<int>(first / s.head_size % s.heads), dim = static_cast<int>(first % s.head_size);
  int b = 0;
  while (b + 1 < p.batch && p.seq_offsets[b + 1] <= row) ++b;
  const std::int64_t t = row - p.seq_offsets[b];
  const std::int64_t keys = band_end_key(p.band, t, p.seq_lens[b]) - band_first_key(p.band, t);
  std::ostringstream o;
  o << "The output is not finite: " << nans << " NaN and " << infs << " Inf elements; the first at sequence " << b
    << ", token " << t << ", head " << head << ", dim " << dim << ", a row that sees " << keys << " key(s)"
    << (keys <= 0 ? " (fully masked: a softmax without the empty-row rule divides 0 by 0)" : "") << " while the golden"
    << " gives " << e.ref[static_cast<std::size_t>(first)] << " there. No variant that is finite there can explain it.";
  // Rows left wholly NaN are the harness's poison: the DUT never wrote them.
  const std::int64_t d = s.head_size, rows = static_cast<std::int64_t>(e.out.size()) / d;
  std::int64_t unwritten = 0, first_unwritten = -1;
  for (std::int64_t r = 0; r < rows; ++r)
    if (std::all_of(e.out.begin() + r * d, e.out.begin() + (r + 1) * d, [](double x) { return std::isnan(x); })) {
      ++unwritten;
      if (first_unwritten < 0) first_unwritten = r;
    }
  if (infs == 0 && unwritten * d == nans) {
    const std::int64_t token_row = first_unwritten / s.heads;
    int seq = 0;
    while (seq + 1 < p.batch && p.seq_offsets[seq + 1] <= token_row) ++seq;
    o << " Every NaN belongs to a (token, head) row that is NaN in all " << d << " dims: " << unwritten
      << " rows still hold the NaN the harness fills the output with, so the DUT never wrote them (the first: sequence "
      << seq << ", token " << token_row - p.seq_offsets[seq] << ", head " << first_unwritten % s.heads
      << "); a row computed to NaN would rarely be NaN in every dim.";
  }
  return o.str();
}

// Where a query row sits in the schedule: its chunk (prompt rows) or decode step. Rows are compared
// in schedule order: every prompt chunk before the first decode step, chunk c of every sequence
// before chunk c + 1 (the DUT is called once per chunk index and once per step, for all sequences).
struct SchedulePlace {
  bool decode = false;
  std::int64_t index = 0;  // chunk index, or decode step
  friend bool operator<(const SchedulePlace& a, const SchedulePlace& b) {
    return std::pair(a.decode, a.index) < std::pair(b.decode, b.index);
  }
};

SchedulePlace place_of(const AttnParams& p, int b, std::int64_t t) {
  const std::int64_t prompt = prompt_len(p, b);
  if (p.mode == RunMode::decode && t >= prompt) return {true, t - prompt};
  const std::int64_t chunk = p.mode == RunMode::prefill ? 0 : (p.chunk > 0 ? p.chunk : prompt);
  return {false, chunk > 0 ? t / chunk : 0};
}

// The worst |out - ref| of query row (sequence b, token t, head h), infinite when not finite; and
// whether the DUT's own output there is finite.
struct RowError {
  double worst = 0;
  bool finite_output = true;
};

RowError row_error(const Scenario& s, const BisectRun& e, int b, std::int64_t t, int h) {
  const Problem& pr = e.reference->problem;
  RowError r;
  for (int k = 0; k < s.head_size; ++k) {
    const std::size_t i = ((pr.seq_offsets[b] + t) * s.heads + h) * s.head_size + k;
    const double err = std::abs(e.out[i] - e.ref[i]);
    r.finite_output = r.finite_output && std::isfinite(e.out[i]);
    r.worst = std::isfinite(err) ? std::max(r.worst, err) : std::numeric_limits<double>::infinity();
  }
  return r;
}

// The max-abs limit of token t of sequence b: its phase's.
double limit_of(const BisectRun& e, int b, std::int64_t t) {
  return e.row_limit[static_cast<std::size_t>(e.reference->problem.seq_offsets[b] + t)];
}

struct FailingRow {
  int sequence = 0, head = 0;
  std::int64_t token = 0;
};

// The rows over the threshold in schedule order (then sequence, token, head), at most `limit`; with
// finite_only, those whose output is finite (a NaN row cannot be fitted).
std::vector<FailingRow> failing_rows(const Scenario& s, const BisectRun& e, std::size_t limit, bool finite_only) {
  const AttnParams& p = e.reference->problem.params;
  std::vector<std::pair<SchedulePlace, FailingRow>> rows;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < s.heads; ++h) {
        const RowError row = row_error(s, e, b, t, h);
        if (row.worst > limit_of(e, b, t) && (!finite_only || row.finite_output)) rows.push_back({place_of(p, b, t), {b, h, t}});
      }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<FailingRow> out;
  for (std::size_t i = 0; i < rows.size() && i < limit; ++i) out.push_back(rows[i].second);
  return out;
}

// Which rows fail, when only some do: only decode steps, only chunks after the first, only the
// first rows of a sequence, only sequences after the first, only some heads. Empty when nothing
// narrows it.
std::vector<std::string> failing_row_pattern(const Scenario& s, const BisectRun& e) {
  const AttnParams& p = e.reference->problem.params;
  std::int64_t failing = 0, decode = 0, prompt = 0, later_chunks = 0, first_rows = 0, chunked_prompt_rows = 0;
  std::set<int> sequences, heads;
  std::int64_t rows = 0, rows_decode = 0, rows_first = 0;
  const std::int64_t w = s.window > 0 ? s.window : -1;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t) {
      const SchedulePlace place = place_of(p, b, t);
      rows += 1;
      rows_decode += place.decode;
      rows_first += w > 0 && t < w - 1;
      for (int h = 0; h < s.heads; ++h) {
        if (!(row_error(s, e, b, t, h).worst > limit_of(e, b, t))) continue;
        ++failing;
        sequences.insert(b);
        heads.insert(h);
        (place.decode ? decode : prompt) += 1;
        if (!place.decode && p.mode != RunMode::prefill && p.chunk > 0) {
          ++chunked_prompt_rows;
          later_chunks += place.index > 0;
        }
        first_rows += w > 0 && t < w - 1;
      }
    }
  std::vector<std::string> pattern;
  if (failing == 0) return pattern;
  if (decode == failing && rows_decode < rows) pattern.push_back("only decode steps fail, no prompt row");
  if (prompt == failing && rows_decode > 0) pattern.push_back("only prompt rows fail, no decode step");
  if (chunked_prompt_rows > 0 && later_chunks == chunked_prompt_rows && chunked_prompt_rows == prompt)
    pattern.push_back("only chunks after the first fail");
  if (w > 1 && first_rows == failing && rows_first < rows)
    pattern.push_back("only the first " + std::to_string(w - 1) + " rows of a sequence fail (their window is not yet full)");
  if (p.batch > 1 && !sequences.count(0)) pattern.push_back("only sequences after the first fail");
  if (static_cast<int>(heads.size()) < s.heads) {
    std::vector<std::string> names, groups;
    std::set<int> kv;
    for (int h : heads) names.push_back(std::to_string(h)), kv.insert(kv_head_for(h, s.heads, s.kv_heads));
    for (int g : kv) groups.push_back(std::to_string(g));
    pattern.push_back("only query head(s) " + join(names, ", ") + " of " + std::to_string(s.heads) + " fail (kv head(s) " +
                      join(groups, ", ") + ")");
  }
  return pattern;
}

// The first query row, in schedule order, whose error exceeds the threshold; and per sequence, the
// first failing decode step or chunk (a decode bug shows at each sequence's own first step).
std::string localize(const Scenario& s, const BisectRun& e) {
  const Problem& pr = e.reference->problem;
  const AttnParams& p = pr.params;
  std::int64_t best_seq = -1, best_token = 0, best_head = -1, rows_over = 0;
  SchedulePlace best_place;
  std::vector<std::optional<std::pair<SchedulePlace, std::int64_t>>> first_in_sequence(p.batch);
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < s.heads; ++h) {
        if (!(row_error(s, e, b, t, h).worst > limit_of(e, b, t))) continue;
        ++rows_over;
        const SchedulePlace here = place_of(p, b, t);
        if (!first_in_sequence[b]) first_in_sequence[b] = std::pair(here, t);
        if (best_seq < 0 || here < best_place || (!(best_place < here) && t < best_token)) {
          best_place = here;
          best_token = t;
          best_seq = b;
          best_head = h;
        }
      }
  std::ostringstream o;
  if (best_seq < 0)
    return e.output_fails ? "no element exceeds its phase's max-abs limit: the outputs fail the verdict by their relative "
                            "L2 error alone (many small errors: the accumulation's precision, not a wrong key)"
                          : "no output row fails: the outputs pass, and the failure is the KV cache's (step 3)";
  const std::int64_t prompt = prompt_len(p, static_cast<int>(best_seq));
  o << rows_over << " (token, head) rows exceed their phase's max-abs limit. The first in schedule order is sequence " << best_seq
    << ", head " << best_head << ", token " << best_token << ".\n";
  if (s.mode != RunMode::prefill) {
    std::vector<std::string> per_sequence;
    for (int b = 0; b < p.batch; ++b) {
      if (!first_in_sequence[b]) {
        per_sequence.push_back("sequence " + std::to_string(b) + ": none");
        continue;
      }
      const auto& [place, token] = *first_in_sequence[b];
      per_sequence.push_back("sequence " + std::to_string(b) + ": " + (place.decode ? "step " : "chunk ") +
                             std::to_string(place.index) + " (token " + std::to_string(token) + ")");
    }
    if (best_place.decode)
      o << "   Decode: the first failing step is " << best_place.index << " (sequence " << best_seq << "'s prompt is "
        << prompt << " tokens).\n";
    else
      o << "   Chunked prefill: the first failing chunk is " << best_place.index << " (chunk size "
        << (s.chunk > 0 ? s.chunk : prompt) << ").\n";
    o << "   First failure per sequence: " << join(per_sequence, "; ") << ".\n";
  }
  if (const auto pattern = failing_row_pattern(s, e); !pattern.empty()) o << "   Pattern: " << join(pattern, "; ") << ".\n";
  if (s.window > 0) {
    const std::int64_t edge = best_token - (s.window - 1);
    o << "   Window edge: token " << best_token << " is " << edge
      << (edge >= 1 ? " rows past the first row whose window is full: it has lost keys to the window."
                    : " rows from the first full window: it still sees every earlier token.") << "\n";
  }
  const int tile = e.traits.query_tile;
  if (tile > 0)
    o << "   Tile position: token " << best_token << " is row " << best_token % tile << " of its " << tile
      << "-row query tile (the DUT's own tile).";
  else
    o << "   Tile position: the DUT states no query tile (dut::Traits).";
  return o.str();
}

// How small a reduction may go: a row must keep enough keys that a sink, a cap or a scale can be
// told from a missing key (a one-key row makes them alike), and sequences long enough to fill the
// window more than once.
struct ReductionFloor {
  std::int64_t window = 0;
  std::int32_t prompt = 0;
};
ReductionFloor floor_for(const Scenario& original) {
  return {std::min<std::int64_t>(original.window, 8),
          std::min<std::int32_t>(*std::max_element(original.prompt_lens.begin(), original.prompt_lens.end()), 16)};
}

// Smaller versions of a scenario, most aggressive first.
std::vector<Scenario> reductions(const Scenario& s, std::int64_t failing_seq, const dut::Traits& traits,
                                 const ReductionFloor& floor) {
  std::vector<Scenario> out;
  if (s.prompt_lens.size() > 1) {
    Scenario r = s;
    r.prompt_lens = {s.prompt_lens[failing_seq]};
    out.push_back(r);
  }
  for (auto [hq, hkv] : {std::pair{1, 1}, {2, 1}, {2, 2}, {4, 2}})
    if (hq * 1.0 < s.heads || (hq == s.heads && hkv < s.kv_heads)) {
      Scenario r = s;
      r.heads = hq;
      r.kv_heads = hkv;
      out.push_back(r);
    }
  {
    Scenario r = s;
    bool shorter = false;
    for (auto& len : r.prompt_lens)
      if (len > floor.prompt) {
        len = std::max((len + 1) / 2, floor.prompt);
        shorter = true;
      }
    if (shorter) out.push_back(r);
  }
  if (s.mode == RunMode::decode && s.decode_steps > 1) {
    Scenario r = s;
    r.decode_steps = (s.decode_steps + 1) / 2;
    out.push_back(r);
  }
  // The smallest head size the DUT runs (any DUT: 16), never one it would skip.
  const std::vector<int> head_sizes = traits.head_sizes.empty() ? std::vector<int>{16, 32, 64} : traits.head_sizes;
  for (int d : head_sizes)
    if (d < s.head_size) {
      Scenario r = s;
      r.head_size = d;
      out.push_back(r);
      break;
    }
  if (s.window > std::max<std::int64_t>(1, floor.window) && s.mask == MaskFormat::none) {
    Scenario r = s;
    r.window = std::max((s.window + 1) / 2, floor.window);
    if (r.chunk > 0 && s.mode != RunMode::prefill) r.chunk = std::max(1, std::min(r.chunk, static_cast<int>(r.window) + 1));
    out.push_back(r);
  }
  return out;
}

// The attention the DUT computed for the failing rows, recovered, at a head size that makes the fit
// well posed (at least twice the candidates) when the case's is not and the DUT runs one.
struct Recovery {
  Finding finding;
  std::vector<RecoveredRow> rows;
  std::optional<Scenario> wider;  // the case the rows were fitted at, when not the case itself
};

Recovery recover(const Scenario& s, const BisectRun& e, const BisectOptions& o, bool may_widen = true);

// A row that sees one or two keys cannot tell a scale from a cap, a sink or a missing key: when the
// case's window is that narrow, fit the case widened to a window of 8 (prompts of 16), if it fails
// there too; otherwise the case itself.
constexpr std::int64_t kFitWindow = 8;
std::optional<Recovery> recover_widened(const Scenario& s, const BisectOptions& o) {
  if (!(s.window > 0 && s.window < kFitWindow) || s.mask != MaskFormat::none) return std::nullopt;
  Scenario wide = s;
  wide.window = kFitWindow;
  for (auto& len : wide.prompt_lens) len = std::max<std::int32_t>(len, 2 * kFitWindow);
  if (scenario_fault(wide, Api::generic)) return std::nullopt;
  const BisectRun run = evaluate_case(wide, o);
  if (!run.error.empty() || !run.output_fails) return std::nullopt;
  Recovery r = recover(wide, run, o, false);
  if (r.finding.name == "not_told") return std::nullopt;
  if (!r.wider) r.wider = wide;
  r.finding.evidence.push_back("fitted on the case widened to window " + std::to_string(kFitWindow) + " (" + wide.id() +
                               "), where it fails too: the case's own rows see too few keys to tell");
  return r;
}

Recovery recover(const Scenario& s, const BisectRun& e, const BisectOptions& o, bool may_widen) {
  if (may_widen)
    if (auto widened = recover_widened(s, o)) return std::move(*widened);
  Recovery r;
  const std::int64_t need = 2 * candidate_count(e.reference->problem.params);
  const BisectRun* run = &e;
  BisectRun wider_run;
  if (s.head_size < need) {
    const std::vector<int> sizes =
        e.traits.head_sizes.empty() ? std::vector<int>{16, 32, 64, 128, 256, 512, 1024} : e.traits.head_sizes;
    const auto d = std::find_if(sizes.begin(), sizes.end(), [&](int x) { return x >= need && x <= 1024; });
    if (d == sizes.end()) {
      r.finding = {"not_told", FindingSource::recovered_attention,
                   {std::to_string(need / 2) + " candidate keys need at least " + std::to_string(need) +
                    " dimensions for a well-posed fit; the case has " + std::to_string(s.head_size) +
                    " and the DUT runs no head size that large"},
                   Confidence::abstained, "the case is too small for a well-posed fit"};
      return r;
    }
    Scenario wider = s;
    wider.head_size = *d;
    wider_run = evaluate_case(wider, o);
    if (!wider_run.error.empty() || !wider_run.fails) {
      r.finding = {"not_told", FindingSource::recovered_attention,
                   {"at head size " + std::to_string(*d) + ", where a fit is well posed, the case " +
                    (wider_run.error.empty() ? "passes" : "does not run: " + wider_run.error) +
                    " (its inputs are drawn anew: a failure that depends on the data may vanish)"},
                   Confidence::abstained, "the fit needs a larger head size, at which the failure does not show"};
      return r;
    }
    r.wider = wider;
    run = &wider_run;
  }
  const Problem& pr = run->reference->problem;
  if (failing_rows(r.wider ? *r.wider : s, *run, 1, /*finite_only=*/false).empty()) {
    r.finding = {"precision_only", FindingSource::none,
                 {"no element exceeds its phase's max-abs limit; the outputs fail on their relative L2 error alone (" +
                  run->reason + "): many small errors, the accumulation's precision, not which keys"},
                 Confidence::medium, "the verdict fails on the L2 criterion alone; no variant replays the accumulation"};
    return r;
  }
  for (const FailingRow& row : failing_rows(r.wider ? *r.wider : s, *run, 48, /*finite_only=*/true))
    r.rows.push_back(recover_row(pr, run->out, row.sequence, row.token, row.head));
  r.finding = classify_recovery(r.rows, pr.params);
  return r;
}

// What the output says when no variant explains it: where it stops being finite, K/V held in a
// narrower type, or the recovered attention.
Finding find_without_variant(const Scenario& s, const BisectRun& e, const BisectOptions& o, Recovery* detail) {
  if (const std::string nf = non_finite_summary(s, e); !nf.empty())
    return {"non_finite_output", FindingSource::non_finite_output, {nf}};
  if (auto narrow = narrow_value_storage(e.reference->problem, e.out, e.ref, e.threshold)) return *narrow;
  if (auto dims = dims_finding(e.reference->problem.params, e.out, e.ref, e.row_limit)) return *dims;
  if (auto fp8 = fp8_value_finding(e.reference->problem, e.out, e.ref, e.row_limit)) return *fp8;
  Recovery r = recover(s, e, o);
  Finding f = r.finding;
  if (detail) *detail = std::move(r);
  return f;
}

// Classes that name which keys a kernel reads: when a variant matches only through the 1% allowance,
// one of these from the recovered attention is the better-founded finding.
bool names_keys(const std::string& name) {
  for (const char* k : {"cross_sequence_leak", "wrong_kv_head", "stale_slot_read", "future_keys", "keys_below_the_window",
                        "extra_keys", "chunk_prefix_dropped", "key_tile_dropped", "own_key_dropped", "keys_dropped"})
    if (name == k) return true;
  return false;
}

void write_repro(const fs::path& path, const Scenario& s, const BisectRun& e, const BisectOptions& o,
                 const Finding& finding, const Recovery* recovery, const std::vector<Ablation>& ablations) {
  const Reference& ref = *e.reference;
  ProblemFile f = problem_file(s, ref, ProblemFileKind::repro);
  if (o.against != "golden") {  // the other DUT's output is the reference, and it has no LSE
    f.reference.assign(e.ref.begin(), e.ref.end());
    f.reference_source = o.against;
    f.reference_lse.clear();
  }
  f.duts.push_back({0, o.dut, std::vector<float>(e.out.begin(), e.out.end()), {{"threshold", e.threshold}}});
  ProblemFile::Diagnosis d;
  d.name = finding.name;
  d.source = finding_source_name(finding.source);
  d.evidence = finding.evidence;
  d.confidence = confidence_name(finding.confidence);
  d.why = finding.why;
  for (const Ablation& a : ablations)
    d.ablation.push_back({a.feature, a.change, ablation_outcome_name(a.outcome), a.scenario.id(), a.redraws_inputs});
  if (recovery && !recovery->rows.empty() && recovery->rows.front().well_posed) {
    d.fitted_case = (recovery->wider ? *recovery->wider : s).id();
    for (const AttentionCandidate& c : recovery->rows.front().candidates)
      d.candidates.insert(d.candidates.end(), {c.sequence, static_cast<std::int32_t>(c.position), c.kv_head});
    for (const RecoveredRow& r : recovery->rows) {
      d.rows.insert(d.rows.end(), {r.sequence, static_cast<std::int32_t>(r.token), r.q_head});
      d.weights.insert(d.weights.end(), r.weights.begin(), r.weights.end());
      d.golden_weights.insert(d.golden_weights.end(), r.golden.begin(), r.golden.end());
    }
  }
  f.diagnosis = d;
  write_problem_file(path, f);
}

// The run's tolerance as sweep-file keys, so the repro is judged by the same rule: the profile, and
// the case's dtype's limits when they are not the profile's (a sweep's `tolerance:` overrides).
std::string tolerance_yaml(const Scenario& s) {
  const Tolerance& t = s.tolerance;
  std::ostringstream o;
  o.precision(17);
  o << "    tolerance_profile: " << profile_name(t.profile) << "\n";
  const Tolerance d = tolerance_for(t.profile, s.dtype);
  if (t.rtol_factor != d.rtol_factor || t.atol_floor != d.atol_floor || t.l2_factor != d.l2_factor ||
      t.l2_floor != d.l2_floor || t.warn_l2_factor != d.warn_l2_factor || t.nmse_max != d.nmse_max)
    o << "    tolerance: {" << dtype_name(s.dtype) << ": {rtol_factor: " << t.rtol_factor << ", atol_floor: " << t.atol_floor
      << ", l2_factor: " << t.l2_factor << ", l2_floor: " << t.l2_floor << ", warn_l2_factor: " << t.warn_l2_factor
      << ", nmse_max: " << t.nmse_max << "}}\n";
  return o.str();
}

// The summary CI bots read (--json, DIR/summary.json).
struct Summary {
  bool reproduces = false;
  std::string dut_error;
  Finding finding;
  std::vector<std::string> pattern;
  double max_abs = 0, threshold = 0;
  std::string reason, minimal_case;
  std::vector<std::pair<double, std::string>> variants;
  std::vector<Ablation> ablations;
  std::vector<std::pair<std::string, std::string>> files;
  double seconds = 0;
};

std::string summary_json(const Scenario& s, const BisectOptions& o, const Summary& m) {
  nlohmann::ordered_json j;
  j["dut"] = o.dut;
  j["reference"] = o.against;
  j["scenario"] = s.id();
  j["reproduces"] = m.reproduces;
  if (!m.dut_error.empty()) j["dut_error"] = m.dut_error;
  j["class"] = m.finding.name;
  j["source"] = finding_source_name(m.finding.source);
  j["confidence"] = confidence_name(m.finding.confidence);
  j["why"] = m.finding.why;
  j["evidence"] = m.finding.evidence;
  j["needs"] = needed_features(m.ablations, false);
  j["needs_with_inputs_redrawn"] = nlohmann::ordered_json::array();
  for (const Ablation& a : m.ablations)
    if (a.outcome == AblationOutcome::passes && a.redraws_inputs) j["needs_with_inputs_redrawn"].push_back(a.feature);
  j["ablation"] = nlohmann::ordered_json::array();
  for (const Ablation& a : m.ablations)
    j["ablation"].push_back({{"feature", a.feature}, {"change", a.change}, {"outcome", ablation_outcome_name(a.outcome)},
                             {"inputs_redrawn", a.redraws_inputs}, {"case", a.scenario.id()}, {"detail", a.detail}});
  j["pattern"] = m.pattern;
  // A non-finite error is not a JSON number: null.
  auto number = [](double x) { return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr); };
  j["max_abs_error"] = number(m.max_abs);
  j["threshold"] = number(m.threshold);
  if (!m.reason.empty()) j["reason"] = m.reason;
  if (!m.minimal_case.empty()) j["minimal_case"] = m.minimal_case;
  j["variants"] = nlohmann::ordered_json::array();
  for (const auto& [difference, name] : m.variants) j["variants"].push_back({{"name", name}, {"difference", number(difference)}});
  for (const auto& [key, path] : m.files) j["files"][key] = path;
  j["seconds"] = m.seconds;
  return j.dump(2) + "\n";
}

}  // namespace

std::optional<std::vector<double>> run_to_output(dut::Dut& dut, const Problem& pr, std::string* error) {
  DutOutput r = run_dut(dut, pr);
  if (r.outcome != Verdict::pass) {
    if (error) *error = (r.outcome == Verdict::skip ? "skipped: " : "") + r.message;
    return std::nullopt;
  }
  return std::vector<double>(r.out.begin(), r.out.end());
}

namespace {

// One bisection as named steps over the state they hand on. Each step writes its section of the
// report; an early ending (the DUT did not run, the failure does not reproduce) still writes the
// report and the summary (finish()).
class Bisection {
 public:
  Bisection(const Scenario& original, const BisectOptions& o, std::ostream& log)
      : original_(original), o_(o), log_(log), t0_(std::chrono::steady_clock::now()) {
    head_ << "swa-harness bisect report\n=========================\n"
          << "DUT:        " << o.dut << "\nReference:  " << (o.against == "golden" ? "the fp64 golden" : o.against)
          << "\nScenario:   " << original.id() << "\n\n";
  }

  // 1. Reproduce: run the case (and reruns); an ending when the DUT cannot run or passes.
  std::optional<int> reproduce();
  // 2. Localize: which rows fail, and where in the schedule.
  void localize_rows();
  // 3. Ablate: which features the failure needs, before any fit.
  void ablate();
  // 4. Diagnose: the cache's differences when only the cache fails; otherwise the variants.
  void diagnose_output();
  // 4 (cont.). The band the DUT attends, measured, when a band variant matched or none did.
  void measure_attended_band();
  // 5. Reduce while the evidence holds.
  void reduce();
  // 6. The finding, judged against the ablation.
  void conclude();
  // 6/7. The repro files.
  void emit_files();
  // Writes report.txt and summary.json (the finding first), prints one, returns `status`.
  int finish(int status);

 private:
  std::string class_of(const Scenario& x, const BisectRun& e) const;
  bool still_needs(const Scenario& candidate, const BisectRun& e) const;
  void word_diagnosis();

  const Scenario& original_;
  const BisectOptions& o_;
  std::ostream& log_;
  const std::chrono::steady_clock::time_point t0_;
  std::ostringstream head_, r_;
  Summary summary_;
  BisectRun first_;
  std::vector<Ablation> ablations_;
  std::vector<std::string> needed_;
  bool cache_only_ = false;
  Diagnosis diag_;
  std::optional<Finding> band_;
  bool suspicious_ = false;
  Scenario minimal_;
  BisectRun minimal_eval_;
  Recovery recovery_;
  int step_ = 6;
};

int Bisection::finish(int status) {
  summary_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  std::ostringstream top;
  top << "Finding: " << summary_.finding.name << " (" << finding_source_name(summary_.finding.source) << ")\n";
  top << "   Confidence: " << confidence_name(summary_.finding.confidence)
      << (summary_.finding.why.empty() ? "" : " (" + summary_.finding.why + ")") << "\n";
  for (const std::string& line : summary_.finding.evidence) top << "   " << line << "\n";
  if (!summary_.pattern.empty()) top << "   Rows: " << join(summary_.pattern, "; ") << ".\n";
  const std::string report = head_.str() + top.str() + "\n" + r_.str() + "\nBisect took " +
                             std::to_string(summary_.seconds) + " s.\n";
  fs::create_directories(o_.out_dir);
  summary_.files.insert(summary_.files.begin(), {"report", (o_.out_dir / "report.txt").string()});
  const std::string json = summary_json(original_, o_, summary_);
  write_file_atomically(o_.out_dir / "report.txt", report);
  write_file_atomically(o_.out_dir / "summary.json", json);
  log_ << (o_.json ? json : report);
  return status;
}

std::optional<int> Bisection::reproduce() {
  r_ << "1. Reproduce\n";
  std::vector<double> errors;
  first_ = evaluate_case(original_, o_);
  if (!first_.error.empty()) {
    r_ << "   The DUT could not run: " << first_.error << "\n";
    summary_.dut_error = first_.error;
    summary_.finding = {"dut_did_not_run", FindingSource::none, {first_.error}};
    return finish(1);
  }
  errors.push_back(first_.max_abs);
  for (int i = 1; i < o_.reruns; ++i) errors.push_back(evaluate_case(original_, o_).max_abs);
  const auto [lo, hi] = std::minmax_element(errors.begin(), errors.end());
  r_ << "   Ran " << o_.reruns << " times: max abs error " << *lo << " .. " << *hi << " against the threshold "
     << first_.threshold << " (" << original_.tolerance.rtol_factor << " x the same-precision baseline's error + "
     << original_.tolerance.atol_floor << ").\n";
  if (*hi != *lo) r_ << "   The error moves between identical runs: suspect a race or uninitialised memory.\n";
  summary_.max_abs = first_.max_abs;
  summary_.threshold = first_.threshold;
  if (!first_.fails) {
    r_ << "   The failure does not reproduce: the DUT passes this scenario.\n";
    summary_.finding = {"does_not_reproduce", FindingSource::none, {"the DUT passes this scenario"}};
    return finish(0);
  }
  summary_.reproduces = true;
  summary_.reason = first_.reason;
  r_ << "   It reproduces: " << first_.reason << "\n\n";
  return std::nullopt;
}

void Bisection::localize_rows() {
  summary_.pattern = failing_row_pattern(original_, first_);
  r_ << "2. Localize\n   " << localize(original_, first_) << "\n\n";
}

void Bisection::ablate() {
  ablations_ = ablations_for(original_, worst_sequence(first_), first_.traits.head_sizes);
  run_ablations(ablations_, [&](const Scenario& x) { return ablated(x, o_); });
  summary_.ablations = ablations_;
  needed_ = needed_features(ablations_, false);
  r_ << "3. Ablate: the case again with one feature turned off or swapped at a time, the seed fixed\n";
  for (const std::string& line : ablation_table(ablations_)) r_ << "   " << line << "\n";
  r_ << "   " << needs_sentence(ablations_) << "\n\n";
}

void Bisection::diagnose_output() {
  cache_only_ = !first_.output_fails;
  if (cache_only_) {
    r_ << "4. Diagnose: the outputs pass; the KV cache differs from the golden cache model\n";
    const Finding f = cache_finding(first_.cache_details, first_.reference->problem.params);
    r_ << "   " << f.name << ": " << (f.evidence.empty() ? "" : f.evidence.front()) << "\n\n";
    return;
  }
  diag_ = diagnose(first_);
  summary_.variants = diag_.ranked;
  r_ << "4. Diagnose: the DUT's output against references that each carry one suspected bug\n";
  for (const auto& [err, name] : diag_.ranked) {
    const std::string& wanted = name;  // clang before 16 cannot capture a structured binding
    const auto& v = *std::find_if(bisect_variants().begin(), bisect_variants().end(),
                                  [&](const Variant& x) { return x.name == wanted; });
    r_ << "   " << (explains(err, first_) ? "MATCH " : "      ") << name << ": max abs difference " << err << " ("
       << v.meaning << ")\n";
  }
  if (!diag_.silent.empty())
    r_ << "   Not told apart from a correct kernel on this case: " << join(diag_.silent, ", ") << "\n";
  if (const std::string nf = non_finite_summary(original_, first_); !nf.empty()) r_ << "   " << nf << "\n";
}

// Measured on the case, then again with one more key on each side, which tells how the DUT's bounds
// follow the case's. Then the diagnosis is worded.
void Bisection::measure_attended_band() {
  static const std::set<std::string> band_variants = {"window_plus_one", "window_minus_one", "no_window",
                                                      "window_right_off_by_one", "window_right_ignored"};
  if (!cache_only_ && (!diag_.explained || band_variants.count(diag_.best)))
    if (const auto measured = measure_band(first_.reference->problem, first_.out, first_.threshold)) {
      auto remeasure = [&](Scenario wider) -> std::optional<WindowBand> {
        const BisectRun w = evaluate_case(wider, o_);
        if (!w.error.empty()) return std::nullopt;
        if (!w.output_fails) return w.reference->problem.params.band;  // it attends the wider case's own band
        return measure_band(w.reference->problem, w.out, w.threshold);
      };
      std::optional<WindowBand> wider_left, wider_right;
      const WindowBand case_band = first_.reference->problem.params.band;
      if (original_.window > 0) {
        Scenario w = original_;
        w.window += 1;
        wider_left = remeasure(w);
      }
      if (original_.window_right > 0) {
        Scenario w = original_;
        w.window_right += 1;
        wider_right = remeasure(w);
      }
      band_ = band_finding(case_band, *measured, wider_left, wider_right);
      // The measurement confirms the variant that matched: it stays the variant's finding.
      if (band_ && diag_.explained && band_->name == diag_.best) band_->source = FindingSource::variant;
      if (band_) r_ << "   The band, measured: " << band_->name << ": " << join(band_->evidence, "; ") << ".\n";
    }
  word_diagnosis();
}

void Bisection::word_diagnosis() {
  // A match through the 1% allowance alone, by more than rounding (a true match differs by ~1e-7 of
  // the error in fp32): the variant may be near without being the bug.
  suspicious_ = diag_.explained && diag_.ranked.front().first > first_.threshold &&
                diag_.ranked.front().first > 1e-4 * first_.max_abs;
  if (cache_only_) return;
  if (diag_.explained)
    r_ << "   Diagnosis: " << diag_.best << ". The DUT's output matches that variant (difference "
       << diag_.ranked.front().first << ", within the baseline-level threshold or 1% of the DUT's error "
       << first_.max_abs << ")"
       << (suspicious_ ? "; only loosely, so step 6 checks it against the recovered attention" : "") << ".\n\n";
  else if (diag_.ranked.empty())
    r_ << "   No variant explains the output: none applies to this case and differs from a correct kernel.\n\n";
  else if (!std::isfinite(diag_.ranked.front().first))
    r_ << "   No variant explains the output, and none comes close: each differs from it by infinity.\n\n";
  else
    r_ << "   No variant explains the output. The closest is " << diag_.best << "; the error is of another kind.\n\n";
}

// The class of finding a case gives: the evidence a reduction must keep.
std::string Bisection::class_of(const Scenario& x, const BisectRun& e) const {
  if (cache_only_) return cache_finding(e.cache_details, e.reference->problem.params).name;
  if (diag_.explained) return diagnose(e).best;
  return find_without_variant(x, e, o_, nullptr).name;
}

// Every feature the failure needs is still in the candidate and still needed (its ablation passes).
bool Bisection::still_needs(const Scenario& candidate, const BisectRun& e) const {
  std::vector<Ablation> check = ablations_for(candidate, worst_sequence(e), e.traits.head_sizes);
  std::erase_if(check, [&](const Ablation& x) {
    return x.redraws_inputs || std::find(needed_.begin(), needed_.end(), x.feature) == needed_.end();
  });
  if (check.size() != needed_.size()) return false;  // a needed feature left the case
  run_ablations(check, [&](const Scenario& x) { return ablated(x, o_); });
  return std::all_of(check.begin(), check.end(), [](const Ablation& x) { return x.outcome == AblationOutcome::passes; });
}

// The same kind of failure (outputs, or the cache only), the same variant or class of finding, and
// every needed feature still needed, never below the floor that keeps rows of several keys.
void Bisection::reduce() {
  std::optional<std::string> locked;
  if (const std::string c = class_of(original_, first_); c != "not_told") locked = c;
  const ReductionFloor floor = floor_for(original_);
  minimal_ = original_;
  minimal_eval_ = std::move(first_);
  for (int round = 0; round < 40; ++round) {
    bool reduced = false;
    for (const Scenario& candidate : reductions(minimal_, worst_sequence(minimal_eval_), minimal_eval_.traits, floor)) {
      BisectRun e = evaluate_case(candidate, o_);
      if (!e.error.empty() || !e.fails || e.output_fails != !cache_only_) continue;
      if (!cache_only_) {
        const Diagnosis d = diagnose(e);
        if (d.explained != diag_.explained || (diag_.explained && d.best != diag_.best)) continue;
      }
      const std::string c = class_of(candidate, e);
      if (c != "not_told" && locked && c != *locked) continue;
      if (!still_needs(candidate, e)) continue;
      if (c != "not_told") locked = c;
      minimal_ = candidate;
      minimal_eval_ = std::move(e);
      reduced = true;
      break;
    }
    if (!reduced) break;
  }
  summary_.minimal_case = minimal_.id();
  r_ << "5. Reduce: the smallest case with the same diagnosis and the same needed features\n   " << minimal_.id()
     << "\n   " << minimal_.prompt_lens.size() << " sequence(s), " << minimal_.heads << " query head(s) / "
     << minimal_.kv_heads << " kv head(s), head size " << minimal_.head_size << ", window " << minimal_.window
     << ".\n   " << localize(minimal_, minimal_eval_) << "\n\n";
}

// The cache's finding, the band's, the variant's, or what the output itself tells (its non-finite
// elements, its single-key rows, the recovered attention); then judged against the ablation.
void Bisection::conclude() {
  if (cache_only_) {
    summary_.finding = cache_finding(minimal_eval_.cache_details, minimal_eval_.reference->problem.params);
  } else if (band_) {
    summary_.finding = *band_;
  } else {
    const auto& variant = *std::find_if(bisect_variants().begin(), bisect_variants().end(),
                                        [&](const Variant& x) { return x.name == diag_.best; });
    if (diag_.explained)
      summary_.finding = {diag_.best, FindingSource::variant,
                          {"the output matches the variant " + diag_.best + " (" + variant.meaning + ")"},
                          suspicious_ ? Confidence::medium : Confidence::high,
                          suspicious_ ? "the variant matches only within 1% of the DUT's error"
                                      : "the output matches the variant to the baseline-level threshold"};
    if (!diag_.explained || suspicious_) {
      r_ << step_++ << ". Recover: which keys the DUT attended, and how\n";
      const Finding f = find_without_variant(minimal_, minimal_eval_, o_, &recovery_);
      if (recovery_.wider)
        r_ << "   (fitted at head size " << recovery_.wider->head_size << ": " << recovery_.wider->id() << ")\n";
      r_ << "   " << f.name << " (" << finding_source_name(f.source) << ")\n";
      for (const std::string& line : f.evidence) r_ << "   " << line << "\n";
      r_ << "\n";
      if (!diag_.explained) {
        summary_.finding = f;
      } else if (names_keys(f.name)) {
        summary_.finding = f;
        summary_.finding.evidence.push_back("the variant " + diag_.best +
                                            " matched only loosely (within 1% of the DUT's error, "
                                            "not to the baseline-level threshold); the recovered attention names the keys");
      }
    }
  }
  if (summary_.finding.name.empty())
    summary_.finding = {"not_told", FindingSource::none, {"nothing tells this failure"}, Confidence::abstained,
                        "no method applies"};
  // The outputs fail and the cache differs too: the cache's own finding is evidence beside it.
  if (!cache_only_ && !minimal_eval_.cache_details.empty()) {
    const Finding c = cache_finding(minimal_eval_.cache_details, minimal_eval_.reference->problem.params);
    summary_.finding.evidence.push_back("The KV cache differs from the golden's too: " + c.name + ": " +
                                        (c.evidence.empty() ? "" : c.evidence.front()));
  }
  summary_.finding = judge_finding(std::move(summary_.finding), ablations_);
}

void Bisection::emit_files() {
  fs::create_directories(o_.out_dir);
  {
    // The DUT's name goes in as a YAML double-quoted scalar (it may hold quotes, backslashes and
    // newlines: an exec: command line); the comment gets it on one line.
    YAML::Emitter quoted;
    quoted << YAML::DoubleQuoted << o_.dut;
    std::string one_line = o_.dut;
    std::replace_if(one_line.begin(), one_line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    std::ostringstream yaml;
    yaml << "# swa-harness bisect: minimal reproduction of\n#   " << original_.id() << "\n# on DUT " << one_line
         << "; finding: " << summary_.finding.name << "\nsweeps:\n  repro:\n"
         << (needs_atb_api(minimal_) ? "    api: atb\n" : "") << tolerance_yaml(minimal_) << "    duts: ["
         << quoted.c_str() << "]\n    include:\n      - " << case_yaml(minimal_) << "\n";
    write_file_atomically(o_.out_dir / "repro.yaml", yaml.str());
  }
  write_repro(o_.out_dir / "repro.h5", minimal_, minimal_eval_, o_, summary_.finding, &recovery_, ablations_);
  summary_.files = {{"repro_yaml", (o_.out_dir / "repro.yaml").string()},
                    {"repro_h5", (o_.out_dir / "repro.h5").string()},
                    {"summary", (o_.out_dir / "summary.json").string()}};
  r_ << step_ << ". Files\n   " << (o_.out_dir / "repro.yaml").string()
     << ": the minimal case; rerun it with\n     swa-harness run " << (o_.out_dir / "repro.yaml").string() << "\n   "
     << (o_.out_dir / "repro.h5").string()
     << ": its inputs, the reference, the DUT's output and the per-element error, and /diagnosis (the finding; the "
        "recovered and golden weights when it was fitted)\n   "
     << (o_.out_dir / "report.txt").string() << ": this report\n   " << (o_.out_dir / "summary.json").string()
     << ": the finding for CI bots (also printed by --json)\n";
}

}  // namespace

int bisect(const Scenario& original, const BisectOptions& o, std::ostream& log) {
  Bisection b(original, o, log);
  if (const std::optional<int> ended = b.reproduce()) return *ended;
  b.localize_rows();
  b.ablate();
  b.diagnose_output();
  b.measure_attended_band();
  b.reduce();
  b.conclude();
  b.emit_files();
  return b.finish(1);
}

}  // namespace swa::harness
