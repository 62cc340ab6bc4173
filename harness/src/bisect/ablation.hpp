#pragma once
// Feature ablation: which features a failure needs. From the reproduced case, the DUT runs again with
// one feature turned off or swapped at a time (sinks off, cap off, FP8 -> the storage dtype, paged ->
// linear, ring <-> linear, many chunks -> one, decode or chunked prefill -> prefill of the same
// tokens, two-sided -> one-sided, window -> none, mask -> band only, GQA -> MHA, head size -> another,
// batch -> the failing sequence alone, fp16/bf16 -> fp32), everything else (the seed, so the inputs)
// fixed. A feature whose ablation passes is one the failure needs: delta debugging over features,
// which needs no list of bugs.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"
#include "swa/harness/case/scenario.hpp"

namespace swa::harness {

enum class AblationOutcome {
  passes,            // the failure goes away: the failure needs the feature
  fails,             // the outputs still fail
  fails_cache_only,  // the outputs pass, the KV cache still differs
  not_run,           // the DUT skips or errors on the ablated case, or it is not a valid case
};
const char* ablation_outcome_name(AblationOutcome o);  // passes | fails | fails (cache only) | not run

struct Ablation {
  std::string feature;  // "sinks", "soft-cap", "FP8 KV", ...
  std::string change;   // what the ablated case has instead: "sinks: none"
  // The ablated case's Q/K/V are not the original's (a head count, head size, dtype or sequence
  // offset changes what the seed draws): weaker evidence, never used to contradict a finding.
  bool redraws_inputs = false;
  Scenario scenario;
  AblationOutcome outcome = AblationOutcome::not_run;
  std::string detail;  // the verdict's reason, or why it did not run
};

// The ablations that apply to `s`, not yet run. `failing_sequence` is the sequence holding the
// largest error; `head_sizes` the DUT's (empty: any).
std::vector<Ablation> ablations_for(const Scenario& s, int failing_sequence, const std::vector<int>& head_sizes);

// How one ablated case went, judged by the same rule as the run that failed.
struct AblationRun {
  AblationOutcome outcome = AblationOutcome::not_run;
  std::string detail;
};
using RunAblated = std::function<AblationRun(const Scenario&)>;
void run_ablations(std::vector<Ablation>& ablations, const RunAblated& run);

// The features whose ablation passes; with_redrawn: also those whose ablation redraws the inputs.
std::vector<std::string> needed_features(const std::vector<Ablation>& ablations, bool with_redrawn);
// Whether ablating `feature` was tried and the failure stayed (outputs or cache).
bool still_fails_without(const std::vector<Ablation>& ablations, const std::string& feature);

// The table for report.txt, a line per ablation.
std::vector<std::string> ablation_table(const std::vector<Ablation>& ablations);
// One sentence: "The failure needs sinks and decode steps (each turned off, it passes); it does not
// need ..." or "no single feature turned off makes it pass".
std::string needs_sentence(const std::vector<Ablation>& ablations);

}  // namespace swa::harness
