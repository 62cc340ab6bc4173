// bisect: reproduce, localize, diagnose, reduce, emit.
#include "swa/harness/bisect.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "recover.hpp"
#include "swa/baseline.hpp"
#include "swa/golden.hpp"
#include "swa/harness/case_schema.hpp"
#include "swa/harness/dut_registry.hpp"
#include "swa/harness/durable_file.hpp"
#include "swa/harness/evaluate.hpp"
#include "swa/harness/verdict.hpp"
#include "swa/harness/problem_file.hpp"
#include "swa/harness/join.hpp"
#include "swa/harness/metrics.hpp"

namespace fs = std::filesystem;

namespace swa::harness {
namespace {

std::optional<std::vector<double>> run_named_dut(const std::string& name, const Problem& pr, std::string& error) {
  auto dut = make_dut(name);
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
  double threshold = 0, max_abs = 0;
  bool fails = false;
  std::string reason;  // the verdict's reason, when it fails
  std::string error;   // the DUT could not run
};

BisectRun evaluate_case(const Scenario& s, const BisectOptions& o) {
  BisectRun e;
  e.reference = std::make_unique<Reference>(s);
  const Reference& ref = *e.reference;
  const Problem& pr = ref.problem;
  e.threshold = s.tolerance.rtol_factor * compare(ref.baseline, ref.golden.out, s.dtype, 0).max_abs + s.tolerance.atol_floor;
  auto dut = make_dut(o.dut);
  e.traits = dut->traits();
  if (o.against == "golden") {
    // The run's own evaluation: the same verdict (per phase, worst element and relative L2) and the
    // same KV cache check, so what failed in a run fails here.
    Evaluation ev = evaluate(s, ref, *dut, o.dut, s.tolerance, s.cache_check);
    if (ev.out.empty()) {
      e.error = (ev.row.status == Verdict::skip ? "skipped: " : "") + ev.row.reason;
      return e;
    }
    e.ref = ref.golden.out;
    e.out.assign(ev.out.begin(), ev.out.end());
    e.fails = is_failure(ev.row.status);
    if (e.fails) e.reason = ev.row.reason;
  } else {
    // Against another DUT its output is the reference and the worst element decides.
    auto other = run_named_dut(o.against, pr, e.error);
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
    e.fails = !(e.max_abs <= e.threshold);
    if (e.fails) e.reason = "max abs difference " + std::to_string(e.max_abs) + " over " + std::to_string(e.threshold);
  }
  return e;
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

struct FailingRow {
  int sequence = 0, head = 0;
  std::int64_t token = 0;
};

// The first row over the threshold in schedule order; with finite_only, the first whose output is
// finite (a NaN row cannot be fitted).
std::optional<FailingRow> first_failing_row(const Scenario& s, const BisectRun& e, bool finite_only = false) {
  const Problem& pr = e.reference->problem;
  const AttnParams& p = pr.params;
  std::optional<FailingRow> best;
  SchedulePlace best_place;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < s.heads; ++h) {
        const RowError row = row_error(s, e, b, t, h);
        if (finite_only && !row.finite_output) continue;
        const SchedulePlace here = place_of(p, b, t);
        if (row.worst > e.threshold && (!best || here < best_place)) {
          best = FailingRow{b, h, t};
          best_place = here;
        }
      }
  return best;
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
        if (!(row_error(s, e, b, t, h).worst > e.threshold)) continue;
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
  if (best_seq < 0) return "no row over the threshold";
  const std::int64_t prompt = prompt_len(p, static_cast<int>(best_seq));
  o << rows_over << " (token, head) rows exceed the threshold. The first in schedule order is sequence " << best_seq
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

// Smaller versions of a scenario, most aggressive first.
std::vector<Scenario> reductions(const Scenario& s, std::int64_t failing_seq, const dut::Traits& traits) {
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
      if (len > 1) {
        len = (len + 1) / 2;
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
  if (s.window > 1 && s.mask == MaskFormat::none) {
    Scenario r = s;
    r.window = (s.window + 1) / 2;
    if (r.chunk > 0 && s.mode != RunMode::prefill) r.chunk = std::max(1, std::min(r.chunk, static_cast<int>(r.window) + 1));
    out.push_back(r);
  }
  return out;
}

void write_repro(const fs::path& path, const Scenario& s, const BisectRun& e, const std::string& dut,
                 const std::string& against) {
  const Reference& ref = *e.reference;
  ProblemFile f = problem_file(s, ref, ProblemFileKind::repro);
  if (against != "golden") {  // the other DUT's output is the reference, and it has no LSE
    f.reference.assign(e.ref.begin(), e.ref.end());
    f.reference_source = against;
    f.reference_lse.clear();
  }
  f.duts.push_back({0, dut, std::vector<float>(e.out.begin(), e.out.end()), {{"threshold", e.threshold}}});
  write_problem_file(path, f);
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

int bisect(const Scenario& original, const BisectOptions& o, std::ostream& log) {
  const auto t0 = std::chrono::steady_clock::now();
  std::ostringstream r;
  r << "swa-harness bisect report\n=========================\n"
    << "DUT:        " << o.dut << "\nReference:  " << (o.against == "golden" ? "the fp64 golden" : o.against)
    << "\nScenario:   " << original.id() << "\n\n";

  // 1. Reproduce.
  r << "1. Reproduce\n";
  std::vector<double> errors;
  BisectRun first = evaluate_case(original, o);
  if (!first.error.empty()) {
    r << "   The DUT could not run: " << first.error << "\n";
    log << r.str();
    return 1;
  }
  errors.push_back(first.max_abs);
  for (int i = 1; i < o.reruns; ++i) errors.push_back(evaluate_case(original, o).max_abs);
  const auto [lo, hi] = std::minmax_element(errors.begin(), errors.end());
  r << "   Ran " << o.reruns << " times: max abs error " << *lo << " .. " << *hi << " against the threshold "
    << first.threshold << " (" << original.tolerance.rtol_factor << " x the same-precision baseline's error + "
    << original.tolerance.atol_floor << ").\n";
  if (*hi != *lo) r << "   The error moves between identical runs: suspect a race or uninitialised memory.\n";
  if (!first.fails) {
    r << "   The failure does not reproduce: the DUT passes this scenario.\n";
    log << r.str();
    fs::create_directories(o.out_dir);
    write_file_atomically(o.out_dir / "report.txt", r.str());
    return 0;
  }
  r << "   It reproduces: " << first.reason << "\n\n";

  // 2. Localize.
  r << "2. Localize\n   " << localize(original, first) << "\n\n";

  // 3. Diagnose.
  const Diagnosis diag = diagnose(first);
  r << "3. Diagnose: the DUT's output against references that each carry one suspected bug\n";
  for (const auto& [err, name] : diag.ranked) {
    const std::string& wanted = name;  // clang before 16 cannot capture a structured binding
    const auto& v = *std::find_if(bisect_variants().begin(), bisect_variants().end(),
                                  [&](const Variant& x) { return x.name == wanted; });
    r << "   " << (explains(err, first) ? "MATCH " : "      ") << name << ": max abs difference " << err << " ("
      << v.meaning << ")\n";
  }
  if (!diag.silent.empty())
    r << "   Not told apart from a correct kernel on this case: " << join(diag.silent, ", ") << "\n";
  if (const std::string nf = non_finite_summary(original, first); !nf.empty()) r << "   " << nf << "\n";
  if (diag.explained)
    r << "   Diagnosis: " << diag.best << ". The DUT's output matches that variant (difference "
      << diag.ranked.front().first << ", within the baseline-level threshold or 1% of the DUT's error "
      << first.max_abs << ").\n\n";
  else if (diag.ranked.empty())
    r << "   No variant explains the output: none applies to this case and differs from a correct kernel.\n\n";
  else if (!std::isfinite(diag.ranked.front().first))
    r << "   No variant explains the output, and none comes close: each differs from it by infinity.\n\n";
  else
    r << "   No variant explains the output. The closest is " << diag.best << "; the error is of another kind.\n\n";

  // 4. Reduce while the same diagnosis holds.
  Scenario minimal = original;
  // Without a diagnosis the recovery below needs a failing row it can fit: keep one if there was one.
  const bool keep_finite_failure = !diag.explained && first_failing_row(original, first, true).has_value();
  BisectRun minimal_eval = std::move(first);
  for (int round = 0; round < 40; ++round) {
    std::int64_t failing_seq = 0;  // the sequence holding the largest error
    double worst = -1;
    for (int b = 0; b < minimal_eval.reference->problem.params.batch; ++b)
      for (std::int64_t i = minimal_eval.reference->problem.seq_offsets[b] * minimal.heads * minimal.head_size;
           i < minimal_eval.reference->problem.seq_offsets[b + 1] * minimal.heads * minimal.head_size; ++i) {
        const double err = std::abs(minimal_eval.out[i] - minimal_eval.ref[i]);
        if (!std::isfinite(err) || err > worst) {
          worst = std::isfinite(err) ? err : std::numeric_limits<double>::infinity();
          failing_seq = b;
        }
      }
    bool reduced = false;
    for (const Scenario& candidate : reductions(minimal, failing_seq, minimal_eval.traits)) {
      BisectRun e = evaluate_case(candidate, o);
      if (!e.error.empty() || !e.fails) continue;
      const Diagnosis d = diagnose(e);
      if (d.explained != diag.explained || (diag.explained && d.best != diag.best)) continue;
      if (keep_finite_failure && !first_failing_row(candidate, e, true)) continue;
      minimal = candidate;
      minimal_eval = std::move(e);
      reduced = true;
      break;
    }
    if (!reduced) break;
  }
  r << "4. Reduce: the smallest case with the same diagnosis\n   " << minimal.id() << "\n   "
    << minimal.prompt_lens.size() << " sequence(s), " << minimal.heads << " query head(s) / " << minimal.kv_heads
    << " kv head(s), head size " << minimal.head_size << ", window " << minimal.window << ".\n   "
    << localize(minimal, minimal_eval) << "\n\n";

  // 5. When no variant explains: the attention the DUT computed, recovered, at a head size that
  // makes the fit well posed when the DUT runs one.
  if (!diag.explained) {
    r << "5. Recover: which keys the DUT attended, and how\n";
    std::optional<RecoveredRow> recovered;
    const Scenario* at = &minimal;
    const BisectRun* run = &minimal_eval;
    BisectRun wider_eval;
    Scenario wider = minimal;
    if (const auto row = first_failing_row(minimal, minimal_eval, /*finite_only=*/true)) {
      recovered = recover_row(run->reference->problem, run->out, row->sequence, row->token, row->head);
      if (!recovered->well_posed) {
        const std::int64_t need = 2 * static_cast<std::int64_t>(recovered->candidates.size());
        const std::vector<int> sizes = minimal_eval.traits.head_sizes.empty() ? std::vector<int>{16, 32, 64, 128, 256}
                                                                               : minimal_eval.traits.head_sizes;
        for (int d : sizes)
          if (d >= need && d <= 1024) {
            wider.head_size = d;
            wider_eval = evaluate_case(wider, o);
            if (wider_eval.error.empty() && wider_eval.fails)
              if (const auto wrow = first_failing_row(wider, wider_eval, /*finite_only=*/true)) {
                at = &wider;
                run = &wider_eval;
                recovered = recover_row(run->reference->problem, run->out, wrow->sequence, wrow->token, wrow->head);
              }
            break;
          }
      }
    }
    if (recovered) {
      if (at != &minimal) r << "   (at head size " << at->head_size << ": " << at->id() << ")\n";
      r << "   " << describe_recovery(*recovered, run->reference->problem.params) << "\n";
    } else {
      r << "   every failing row of the minimal case is NaN or Inf: nothing to fit (step 3 says where).\n\n";
    }
  }

  // 6. Emit.
  fs::create_directories(o.out_dir);
  {
    // The DUT's name goes in as a YAML double-quoted scalar (it may hold quotes, backslashes and
    // newlines: an exec: command line); the comment gets it on one line.
    YAML::Emitter quoted;
    quoted << YAML::DoubleQuoted << o.dut;
    std::string one_line = o.dut;
    std::replace_if(one_line.begin(), one_line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    std::ostringstream yaml;
    yaml << "# swa-harness bisect: minimal reproduction of\n#   " << original.id() << "\n# on DUT " << one_line
         << (diag.explained ? "; diagnosis: " + diag.best : "; no diagnosis") << "\nsweeps:\n  repro:\n"
         << (needs_atb_api(minimal) ? "    api: atb\n" : "") << "    duts: [" << quoted.c_str() << "]\n    include:\n      - "
         << case_yaml(minimal) << "\n";
    write_file_atomically(o.out_dir / "repro.yaml", yaml.str());
  }
  write_repro(o.out_dir / "repro.h5", minimal, minimal_eval, o.dut, o.against);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r << (diag.explained ? "5" : "6") << ". Files\n   " << (o.out_dir / "repro.yaml").string() << ": the minimal case; rerun it with\n     swa-harness run "
    << (o.out_dir / "repro.yaml").string() << "\n   " << (o.out_dir / "repro.h5").string()
    << ": its inputs, the reference, the DUT's output and the per-element error\n   "
    << (o.out_dir / "report.txt").string() << ": this report\n\nBisect took " << seconds << " s.\n";
  write_file_atomically(o.out_dir / "report.txt", r.str());
  log << r.str();
  return 1;
}

}  // namespace swa::harness
