// bisect: reproduce, localize, diagnose, reduce, emit.
#include "swa/harness/bisect/bisect.hpp"

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "bisection.hpp"
#include "steps.hpp"
#include "ablation.hpp"
#include "band.hpp"
#include "cache_finding.hpp"
#include "finding.hpp"
#include "judgement.hpp"
#include "key_runs.hpp"
#include "placement.hpp"
#include "readings_search.hpp"
#include "zero_rows.hpp"
#include "output_grid.hpp"
#include "recover.hpp"
#include "semantics.hpp"
#include "swa/baseline.hpp"
#include "swa/golden.hpp"
#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/base/host.hpp"
#include "swa/harness/base/text.hpp"
#include "swa/harness/judge/evaluate.hpp"
#include "swa/harness/judge/verdict.hpp"
#include "swa/harness/case/problem_file.hpp"
#include "swa/harness/base/join.hpp"
#include "swa/harness/judge/metrics.hpp"

namespace swa::harness {

int Bisection::finish(int status) {
  summary_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const std::string report = head_.str() + finding_text(summary_) + "\n" + r_.str() + "\nBisect took " +
                             std::to_string(summary_.seconds) + " s.\n";
  std::filesystem::create_directories(o_.out_dir);
  summary_.files.insert(summary_.files.begin(), {"report", (o_.out_dir / "report.txt").string()});
  const std::string json = summary_json(original_, o_, summary_);
  write_file_atomically(o_.out_dir / "report.txt", report);
  write_file_atomically(o_.out_dir / "summary.json", json);
  log_ << (o_.json ? json : report);
  return status;
}

std::optional<int> Bisection::reproduce() {
  progress("reproduce: running the scenario " + std::to_string(o_.reruns) + " time(s)");
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
    if (fails_after_earlier_calls()) return finish(1);
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
  where_failing_ = failing_rows_geometry(original_, first_, RowsOf::failing);
  where_not_finite_ = failing_rows_geometry(original_, first_, RowsOf::non_finite);
  where_zero_ = failing_rows_geometry(original_, first_, RowsOf::failing_zero);
  zero_rows_ = count_zero_rows(first_.reference->problem, first_.out, first_.ref, first_.row_limit);
  narrower_output_ = output_through_narrower_type(first_.reference->problem, first_.out, first_.ref, first_.row_limit);
  r_ << "2. Localize\n   " << localize(original_, first_) << "\n\n";
}

void Bisection::ablate() {
  progress("ablate: the case again with one feature off at a time");
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
  // First the variants: each computes one known bug exactly, so a match at the baseline-level
  // threshold reproduces the output. Then, when none does, the readings of the spec.
  progress("variants: the output against references that each carry one known bug");
  diag_ = diagnose(first_);
  summary_.variants = diag_.ranked;
  r_ << "4. Diagnose: the DUT's output against references that each carry one known bug\n";
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
  const bool reproduced = diag_.explained && diag_.ranked.front().first <= first_.threshold;
  if (!reproduced && every_failing_row_zero(zero_rows_) && first_.cache_details.empty()) {
    r_ << "\n4b. Not searched: every failing row holds exactly 0 (rows not computed, or computed over no key); the readings "
          "cannot tell more than which rows. Which rows: a rule of the rows' positions that leaves exactly them no key\n";
    progress("key runs: a rule of the rows' positions that gives the rows exactly 0 no key");
    key_runs_ = fit_key_runs(first_.reference->problem, first_.out, first_.ref, first_.row_limit,
                             {{first_.traits.query_tile, first_.traits.key_tile}});
    if (key_runs_ && key_runs_->reproduced)
      r_ << "   Keys measured: " << key_runs_->name << " (the DUT " << key_runs_->words << ") gives every row of the case: the "
         << zero_rows_.zero << " rows exactly 0 no key, the others their window.\n";
    else
      r_ << "   Keys measured: no rule of the rows' positions gives exactly these rows no key.\n";
    return;
  }
  if (!reproduced && narrower_output_ && first_.cache_details.empty()) {
    r_ << "\n4b. Not searched: " << narrower_output_->evidence.front() << "\n";
    return;
  }
  if (!reproduced) search_for_a_reading();
}

void Bisection::progress(const std::string& line) const { print_progress(t0_, line); }

std::optional<std::string> Bisection::cache_went_wrong_first() const {
  // What reproduces the output comes first: a variant that matches it, the band measured.
  if (cache_only_ || (diag_.explained && !suspicious_) || band_) return std::nullopt;
  return harness::cache_went_wrong_first(minimal_, minimal_eval_);
}

// Measured on the case, then again with one more key on each side, which tells how the DUT's bounds
// follow the case's. Then the diagnosis is worded.
void Bisection::measure_attended_band() {
  if (reading_) return;
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
  if (key_runs_) {  // the keys measured again (a second or so), not the least-squares recovery (minutes at 500 tokens)
    const auto k = fit_key_runs(e.reference->problem, e.out, e.ref, e.row_limit, {{e.traits.query_tile, e.traits.key_tile}});
    return k ? k->name : "not_told";
  }
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
  progress("reduce: the smallest case with the same finding and the same needed features");
  std::optional<std::string> locked;
  if (reading_) locked = reading_->name();
  else if (const std::string c = class_of(original_, first_); c != "not_told") locked = c;
  const ReductionFloor floor = floor_for(original_);
  minimal_ = original_;
  minimal_eval_ = std::move(first_);
  for (int round = 0; round < 40; ++round) {
    bool reduced = false;
    for (const Scenario& candidate : reductions(minimal_, worst_sequence(minimal_eval_), minimal_eval_.traits, floor)) {
      BisectRun e = evaluate_case(candidate, o_);
      if (!e.error.empty() || !e.fails || e.output_fails != !cache_only_) continue;
      if (reading_) {
        if (!tell_apart(candidate, e)) continue;
        if (!still_needs(candidate, e)) continue;
        minimal_ = candidate;
        minimal_eval_ = std::move(e);
        reduced = true;
        break;
      }
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
  if (reading_) tell_apart_on_probes();
  else if (key_runs_) hold_key_runs_to_probes(*key_runs_, original_, o_, [&](const std::string& l) { progress(l); });
  summary_.minimal_case = minimal_.id();
  r_ << "5. Reduce: the smallest case with the same diagnosis and the same needed features\n   " << minimal_.id()
     << "\n   " << minimal_.prompt_lens.size() << " sequence(s), " << minimal_.heads << " query head(s) / "
     << minimal_.kv_heads << " kv head(s), head size " << minimal_.head_size << ", window " << minimal_.window
     << ".\n   " << localize(minimal_, minimal_eval_) << "\n\n";
}

// The cache's finding, the band's, the variant's, or what the output itself tells (its non-finite
// elements, its single-key rows, the recovered attention); then judged against the ablation.
void Bisection::conclude() {
  progress("conclude: the finding and its confidence");
  // A variant that computes the output exactly is a known bug reproduced: it leads the facts of the
  // output below (zero rows, a narrower grid), which it may produce too (a window of W - 1 at W = 1).
  const bool facts = first_.cache_details.empty() && (every_failing_row_zero(zero_rows_) || narrower_output_);
  const bool variant_exact = diag_.explained && !suspicious_ && diag_.ranked.front().first <= first_.threshold &&
                             (!facts || variant_holds_on_a_probe());
  if (cache_only_) {
    summary_.finding = cache_finding(minimal_eval_.cache_details, minimal_eval_.reference->problem.params);
  } else if (every_failing_row_zero(zero_rows_) && first_.cache_details.empty() && !variant_exact) {
    summary_.finding = zero_rows_finding(zero_rows_, where_failing_, reading_ ? reading_->name() + " (the DUT " + reading_->words() + ")" : "", key_runs_);
  } else if (narrower_output_ && first_.cache_details.empty() && !variant_exact) {
    summary_.finding = *narrower_output_;
  } else if (reading_) {
    summary_.finding = reading_finding();
  } else if (placement_) {
    summary_.finding = placement_finding(*placement_);
  } else if (key_runs_ && key_runs_->reproduced) {
    summary_.finding = key_run_finding(*key_runs_);
  } else if (const std::optional<std::string> first = cache_went_wrong_first()) {
    summary_.finding = cache_finding(minimal_eval_.cache_details, minimal_eval_.reference->problem.params);
    summary_.finding.evidence.push_back(*first);
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
    summary_.finding.reproduced = diag_.explained && !suspicious_ && diag_.ranked.front().first <= first_.threshold;
    if (diag_.explained && !suspicious_)
      variant_unlike_reading_ = hold_variant_to_its_reading(summary_.finding, diag_.best, minimal_eval_.reference->problem.params,
                                                            minimal_eval_.out, minimal_eval_.ref, minimal_eval_.row_limit);
    if (!diag_.explained || suspicious_) {
      r_ << step_++ << ". Recover: which keys the DUT attended, and how\n";
      // Runs measured on every failing row say which keys more exactly, and sooner, than a least-squares fit.
      // A split merge no rule reproduced is a weak account (free weights per row): the recovery's class
      // leads when it names one, the split weights stand beside it.
      const bool weak_split = key_runs_ && key_runs_->kind == KeyRunKind::splits && !key_runs_->reproduced;
      Finding f = key_runs_ && !weak_split ? key_run_finding(*key_runs_) : find_without_variant(minimal_, minimal_eval_, o_, &recovery_);
      if (weak_split) {
        const Finding split = key_run_finding(*key_runs_);
        if (f.confidence == Confidence::abstained) f = split;
        else f.evidence.push_back("Also measured (" + split.name + "): " + split.evidence.front());
      }
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
  tell_the_zero_rows();
  // No reading reproduced the output: what follows describes it, it does not compute it.
  if (!cache_only_ && !reading_ && summary_.readings) {
    const ReadingSearch& found = *summary_.readings;
    std::ostringstream o;
    o.precision(3);
    if (found.spec_within_noise)
      o << "No reading of the spec was searched: every failing row is within one unit of the DUT's storage of the golden "
           "itself, which no reading can be told from";
    else
      o << "No reading of the spec reproduces the output (" << found.evaluated << " evaluated on the DUT's own inputs)";
    if (found.closest)
      o << "; the closest, " << found.closest->name() << " (the DUT " << found.closest->words() << "), leaves "
        << found.closest->failing_within << " of the " << found.closest->failing << " failing rows compared within their limit";
    summary_.finding.evidence.push_back(o.str() + ".");
    const bool computed = (summary_.finding.source == FindingSource::variant && !suspicious_ && !variant_unlike_reading_) ||
                          summary_.finding.reproduced;
    if (summary_.finding.confidence == Confidence::high && !computed) {
      summary_.finding.confidence = Confidence::medium;
      summary_.finding.why = (summary_.finding.why.empty() ? "" : summary_.finding.why + "; ") +
                             "at most medium: no computation of the cause reproduced the output";
    }
  }
  // Where the rows go wrong, on the case as it came (a reduction can leave every row failing).
  const bool nan = summary_.finding.source == FindingSource::non_finite_output;
  if (!summary_.finding.reproduced && !(nan ? where_not_finite_ : where_failing_).empty())
    summary_.finding.evidence.push_back(std::string(nan ? "The rows not finite" : "The failing rows") + " of " + original_.id() +
                                        ", by position: " + (nan ? where_not_finite_ : where_failing_) + ".");
  // The outputs fail and the cache differs too: the cache's own finding is evidence beside it, or
  // leads where the outputs told nothing (cache_first.cpp).
  if (!cache_only_ && !minimal_eval_.cache_details.empty() && summary_.finding.source != FindingSource::cache_check)
    summary_.finding = with_the_cache_s_finding(std::move(summary_.finding),
                                                cache_finding(minimal_eval_.cache_details, minimal_eval_.reference->problem.params));
  summary_.finding = judge_finding(std::move(summary_.finding), ablations_);
}

void Bisection::emit_files() {
  progress("files: " + o_.out_dir.string());
  std::filesystem::create_directories(o_.out_dir);
  {
    // The DUT's name goes in as a YAML double-quoted scalar (it may hold quotes, backslashes and
    // newlines: an exec: command line); the comment gets it on one line.
    YAML::Emitter quoted;
    quoted << YAML::DoubleQuoted << dut_from_anywhere(o_.dut);  // the repro runs from any folder
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
     << ": the minimal case; rerun it with\n     " << shell_quote(command_word("swa-harness")) << " run "
     << shell_quote(std::filesystem::absolute(o_.out_dir / "repro.yaml").lexically_normal().string()) << " --out "
     << shell_quote(std::filesystem::absolute(o_.out_dir / "rerun.h5").lexically_normal().string()) << "\n   "
     << (o_.out_dir / "repro.h5").string()
     << ": its inputs, the reference, the DUT's output and the per-element error, and /diagnosis (the finding; the "
        "recovered and golden weights when it was fitted)\n   "
     << (o_.out_dir / "report.txt").string() << ": this report\n   " << (o_.out_dir / "summary.json").string()
     << ": the finding for CI bots (also printed by --json)\n";
}

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
