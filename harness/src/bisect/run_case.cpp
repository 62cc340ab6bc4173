// bisect: one case run and judged as the run judges it (evaluate_case), and its helpers.
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

BisectRun evaluate_case(const Scenario& s, const BisectOptions& o, int runs_before, const std::vector<Scenario>& run_first) {
  BisectRun e;
  e.reference = std::make_unique<Reference>(s);
  const Reference& ref = *e.reference;
  const Problem& pr = ref.problem;
  e.threshold = s.tolerance.rtol_factor * compare(ref.baseline(), ref.golden.out, s.dtype, 0).max_abs + s.tolerance.atol_floor;
  auto dut = make_dut(o.dut, o.dut_options);
  e.traits = dut->traits();
  for (const Scenario& x : run_first) {
    Problem earlier;
    try {
      build_problem(x.problem_spec(), earlier);
    } catch (const std::exception&) {
      continue;  // a scenario this build cannot draw: it leaves nothing in the DUT
    }
    std::string ignored;
    (void)run_to_output(*dut, earlier, &ignored);
  }
  for (int i = 0; i < runs_before; ++i) {
    std::string ignored;
    (void)run_to_output(*dut, pr, &ignored);
  }
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

std::optional<std::vector<double>> run_to_output(dut::Dut& dut, const Problem& pr, std::string* error) {
  DutOutput r = run_dut(dut, pr);
  if (r.outcome != Verdict::pass) {
    if (error) *error = (r.outcome == Verdict::skip ? "skipped: " : "") + r.message;
    return std::nullopt;
  }
  return std::vector<double>(r.out.begin(), r.out.end());
}

}  // namespace swa::harness
