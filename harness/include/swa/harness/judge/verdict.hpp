#pragma once
// The verdict: one rule for the runner, bisect and perf mode. Each phase of a schedule (the prompt,
// each chunk, the decode rows) is judged on its own rows against the same-precision baseline's
// error on those rows, by the worst element and by the relative L2 error, so neither a large
// prompt nor one lucky element sets the bar for the rest.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "swa/dtype.hpp"
#include "swa/harness/judge/metrics.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/harness/judge/results.hpp"
#include "swa/harness/case/tolerance.hpp"
#include "swa/harness/judge/verdict_enum.hpp"

namespace swa::harness {


// Token rows judged together: "prompt", "chunk C" (chunked prefill, and a decode run's prompt
// chunks) and "decode" (every decode row).
struct Phase {
  std::string name;
  std::vector<std::int64_t> rows;
};
std::vector<Phase> phases_of(const AttnParams& params);

// The same-precision baseline's error against the golden, which sets every verdict's limits on a
// scenario: over the whole output, and per phase (phases_of's order). A function of the scenario
// alone, so it is computed once per scenario, not per DUT, and kept in the golden cache.
struct BaselineErrors {
  double max_abs = 0, rel_l2 = 0, nmse = 0, mean_ulp = 0;  // the whole output's (compare's)
  std::vector<ErrorNorms> phases;
};
BaselineErrors baseline_errors(const AttnParams& params, std::span<const double> golden, std::span<const float> baseline);

// The metrics and the verdict of one output (rows [nTokens, Hq, D] in the dtype's values) against
// the golden, with the baseline's errors setting the limits. `dut` names the row. The params give
// the problem's shape and schedule (its pointers to inputs are not read). Throws
// std::invalid_argument when `baseline` has not one entry per phase.
ResultRow judge(const AttnParams& params, const Tolerance& tolerance, const std::string& dut, std::span<const float> out,
                std::span<const double> golden, const BaselineErrors& baseline);
// The same, the baseline's errors computed from its output.
ResultRow judge(const AttnParams& params, const Tolerance& tolerance, const std::string& dut, std::span<const float> out,
                std::span<const double> golden, std::span<const float> baseline);

}  // namespace swa::harness
