// bisect: the repro files and the summary CI bots read.
#include "steps.hpp"

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
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
#include "readings_search.hpp"
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
  if (m.readings) {
    nlohmann::ordered_json r;
    r["evaluated"] = m.readings->evaluated;
    r["seconds"] = m.readings->seconds;
    r["spec_within_noise"] = m.readings->spec_within_noise;
    r["reproducing"] = nlohmann::ordered_json::array();
    for (const ReadingTrial& t : m.readings->reproducing)
      r["reproducing"].push_back({{"class", t.name()}, {"words", t.words()}, {"rows", t.rows}, {"failing_rows", t.failing},
                                  {"worst_difference", number(t.worst_difference)}, {"worst_share_of_limit", number(t.worst_share)}});
    if (m.readings->closest)
      r["closest"] = {{"class", m.readings->closest->name()}, {"words", m.readings->closest->words()},
                      {"failing_rows_compared", m.readings->closest->failing},
                      {"failing_rows_within", m.readings->closest->failing_within},
                      {"worst_share_of_limit", number(m.readings->closest->worst_share)}};
    j["readings"] = r;
  }
  for (const auto& [key, path] : m.files) j["files"][key] = path;
  j["seconds"] = m.seconds;
  return j.dump(2) + "\n";
}

void print_progress(std::chrono::steady_clock::time_point start, const std::string& line) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << "swa-harness bisect: [" << t << " s] " << line << "\n";
  std::cerr << o.str() << std::flush;
}

std::string finding_text(const Summary& m) {
  std::ostringstream top;
  top << "Finding: " << m.finding.name << " (" << finding_source_name(m.finding.source) << ")\n";
  top << "   Confidence: " << confidence_name(m.finding.confidence) << (m.finding.why.empty() ? "" : " (" + m.finding.why + ")")
      << "\n";
  for (const std::string& line : m.finding.evidence) top << "   " << line << "\n";
  if (!m.pattern.empty()) top << "   Rows: " << join(m.pattern, "; ") << ".\n";
  return top.str();
}

}  // namespace swa::harness
