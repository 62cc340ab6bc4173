// bisect: what the output says when no reading or variant reproduces it (its NaN, its storage, its recovered attention).
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
  // A row written as exactly 0 is the weighting of no key, whatever the kernel did to it: it tells no
  // weights, and a fit of it would read as "the weights sum to 0". The rows that are not 0 are fitted.
  const Scenario& fitted = r.wider ? *r.wider : s;
  constexpr std::size_t kAll = std::numeric_limits<std::size_t>::max(), kFitted = 48;
  const std::size_t finite = failing_rows(fitted, *run, kAll, /*finite_only=*/true).size();
  std::vector<FailingRow> nonzero = failing_rows(fitted, *run, kAll, /*finite_only=*/true, /*nonzero_only=*/true);
  const std::size_t nonzero_count = nonzero.size();
  if (nonzero.size() > kFitted) nonzero.resize(kFitted);
  if (nonzero.empty()) {
    r.finding = {"rows_not_computed", FindingSource::recovered_attention,
                 {"every one of the " + std::to_string(finite) + " finite failing rows of the case fitted (" + fitted.id() +
                  ") holds exactly 0 in every element: the rows attended no key or values that are zeros (memory "
                  "never written), or were never computed, or were zeroed afterwards; no weights to fit"},
                 Confidence::medium, "every fitted failing row is exactly 0"};
    return r;
  }
  for (const FailingRow& row : nonzero) r.rows.push_back(recover_row(pr, run->out, row.sequence, row.token, row.head));
  r.finding = classify_recovery(r.rows, pr.params);
  if (nonzero_count < finite)
    r.finding.evidence.push_back(std::to_string(finite - nonzero_count) + " of the " + std::to_string(finite) +
                                 " finite failing rows there hold exactly 0 in every element (they attended no key or "
                                 "values that are zeros, or were never computed): left out of the fit, which is of the other " +
                                 std::to_string(nonzero_count));
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

}  // namespace swa::harness
