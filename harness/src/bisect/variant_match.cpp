// bisect: the DUT's output held against the built-in variants.
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

}  // namespace swa::harness
