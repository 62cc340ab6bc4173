#include "ablation.hpp"

#include <algorithm>

#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/base/join.hpp"

namespace swa::harness {

const char* ablation_outcome_name(AblationOutcome o) {
  switch (o) {
    case AblationOutcome::passes: return "passes";
    case AblationOutcome::fails: return "fails";
    case AblationOutcome::fails_cache_only: return "fails (cache only)";
    case AblationOutcome::not_run: return "not run";
  }
  return "not run";
}

namespace {

bool ring(CachePolicy c) { return c == CachePolicy::ring_modulo || c == CachePolicy::ring_compact; }

std::int32_t longest(const std::vector<std::int32_t>& lens) { return *std::max_element(lens.begin(), lens.end()); }

// A head size the DUT runs other than s's: 64, or 128 for a case at 64.
std::optional<int> other_head_size(int d, const std::vector<int>& runs) {
  for (int want : {64, 128, 32, 96})
    if (want != d && (runs.empty() || std::find(runs.begin(), runs.end(), want) != runs.end())) return want;
  for (int x : runs)
    if (x != d) return x;
  return std::nullopt;
}

}  // namespace

std::vector<Ablation> ablations_for(const Scenario& s, int failing_sequence, const std::vector<int>& head_sizes) {
  std::vector<Ablation> out;
  auto add = [&](std::string feature, std::string change, bool redraws, auto edit) {
    Ablation a{std::move(feature), std::move(change), redraws, s, AblationOutcome::not_run, {}};
    edit(a.scenario);
    normalise(a.scenario);
    out.push_back(std::move(a));
  };
  const bool cached = s.mode != RunMode::prefill;
  if (s.sinks != Sinks::none) add("sinks", "sinks: none", false, [](Scenario& x) { x.sinks = Sinks::none; });
  if (s.softcap > 0) add("soft-cap", "softcap: 0", false, [](Scenario& x) { x.softcap = 0; });
  if (is_fp8(s.kv_dtype)) add("FP8 KV", "kv_dtype: dtype", false, [](Scenario& x) { x.kv_dtype = KvFormat::dtype; });
  if (cached && s.cache == CachePolicy::paged)
    add("paged cache", "cache: linear", false, [](Scenario& x) { x.cache = CachePolicy::linear; });
  if (cached && ring(s.cache)) add("ring cache", "cache: linear", false, [](Scenario& x) { x.cache = CachePolicy::linear; });
  if (cached && s.cache == CachePolicy::linear && s.window > 0)
    add("linear cache", "cache: ring-modulo", false, [](Scenario& x) { x.cache = CachePolicy::ring_modulo; });
  const std::int32_t prompt = longest(s.prompt_lens);
  if (cached && (s.mode == RunMode::chunked_prefill ? s.chunk < prompt : s.chunk > 0 && s.chunk < prompt))
    add("chunks", "one chunk per prompt", false, [&](Scenario& x) {
      x.chunk = x.mode == RunMode::chunked_prefill ? prompt : 0;
    });
  if (s.mode == RunMode::decode)
    add("decode steps", "mode: prefill of the same tokens", false, [](Scenario& x) {
      for (auto& len : x.prompt_lens) len += x.decode_steps;
      x.mode = RunMode::prefill;
      x.decode_steps = 0;
      x.chunk = 0;
    });
  if (s.mode == RunMode::chunked_prefill)
    add("chunked prefill", "mode: prefill of the same tokens", false, [](Scenario& x) {
      x.mode = RunMode::prefill;
      x.chunk = 0;
    });
  if (s.window_right > 0) add("two-sided window", "window_right: 0", false, [](Scenario& x) { x.window_right = 0; });
  if (s.window > 0 && s.mask == MaskFormat::none)
    add("window", "window: 0 (no window)", false, [](Scenario& x) {
      x.window = 0;
      if (ring(x.cache)) x.cache = CachePolicy::linear;
    });
  if (s.mask != MaskFormat::none) add("mask", "mask: none (the band alone)", false, [](Scenario& x) { x.mask = MaskFormat::none; });
  if (s.kv_heads != s.heads) add("GQA", "kv_heads: " + std::to_string(s.heads), true, [](Scenario& x) { x.kv_heads = x.heads; });
  if (const auto d = other_head_size(s.head_size, head_sizes))
    add("head size", "head_size: " + std::to_string(*d), true, [&](Scenario& x) { x.head_size = *d; });
  if (s.prompt_lens.size() > 1)
    add("batch", "sequence " + std::to_string(failing_sequence) + " alone", failing_sequence != 0, [&](Scenario& x) {
      x.prompt_lens = {s.prompt_lens[failing_sequence]};
    });
  if (s.dtype != DType::fp32) add("dtype", "dtype: fp32", true, [](Scenario& x) { x.dtype = DType::fp32; });
  // A case no sweep file could hold (an ablation that breaks a rule of both APIs: an ATB decode case
  // keeps its mask) is not run.
  for (Ablation& a : out)
    if (const auto fault = scenario_fault(a.scenario, Api::generic); fault && scenario_fault(a.scenario, Api::atb))
      a.detail = "not a valid case: " + fault->message;
  return out;
}

void run_ablations(std::vector<Ablation>& ablations, const RunAblated& run) {
  for (Ablation& a : ablations) {
    if (!a.detail.empty()) continue;
    const AblationRun r = run(a.scenario);
    a.outcome = r.outcome;
    a.detail = r.detail;
  }
}

std::vector<std::string> needed_features(const std::vector<Ablation>& ablations, bool with_redrawn) {
  std::vector<std::string> out;
  for (const Ablation& a : ablations)
    if (a.outcome == AblationOutcome::passes && (with_redrawn || !a.redraws_inputs)) out.push_back(a.feature);
  return out;
}

bool still_fails_without(const std::vector<Ablation>& ablations, const std::string& feature) {
  return std::any_of(ablations.begin(), ablations.end(), [&](const Ablation& a) {
    return a.feature == feature && (a.outcome == AblationOutcome::fails || a.outcome == AblationOutcome::fails_cache_only);
  });
}

std::vector<std::string> ablation_table(const std::vector<Ablation>& ablations) {
  std::vector<std::string> lines;
  for (const Ablation& a : ablations) {
    std::string line = a.feature + " -> " + a.change + ": " + ablation_outcome_name(a.outcome);
    if (a.redraws_inputs) line += " (inputs redrawn)";
    if (a.outcome != AblationOutcome::passes && !a.detail.empty()) line += " [" + a.detail.substr(0, 160) + "]";
    lines.push_back(line);
  }
  return lines;
}

std::string needs_sentence(const std::vector<Ablation>& ablations) {
  if (ablations.empty()) return "No feature of this case can be turned off (a plain case).";
  const std::vector<std::string> needs = needed_features(ablations, false), weak = [&] {
    std::vector<std::string> w;
    for (const Ablation& a : ablations)
      if (a.outcome == AblationOutcome::passes && a.redraws_inputs) w.push_back(a.feature);
    return w;
  }();
  std::vector<std::string> not_needed;
  for (const Ablation& a : ablations)
    if (a.outcome == AblationOutcome::fails || a.outcome == AblationOutcome::fails_cache_only) not_needed.push_back(a.feature);
  std::string o;
  if (needs.empty() && weak.empty())
    o = "No single feature turned off makes it pass";
  else if (needs.empty())
    o = "With the same inputs no single feature turned off makes it pass";
  else
    o = "The failure needs " + join(needs, " and ") + " (each turned off, with the same inputs, it passes)";
  if (!weak.empty()) o += "; it also passes with " + join(weak, ", ") + " changed (inputs redrawn: weaker evidence)";
  if (!not_needed.empty()) o += "; it still fails without " + join(not_needed, ", ");
  return o + ".";
}

}  // namespace swa::harness
