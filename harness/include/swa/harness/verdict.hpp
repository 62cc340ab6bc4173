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
#include "swa/harness/problem.hpp"
#include "swa/harness/results.hpp"
#include "swa/harness/tolerance.hpp"
#include "swa/harness/verdict_enum.hpp"

namespace swa::harness {


// Token rows judged together: "prompt", "chunk C" (chunked prefill, and a decode run's prompt
// chunks) and "decode" (every decode row).
struct Phase {
  std::string name;
  std::vector<std::int64_t> rows;
};
std::vector<Phase> phases_of(const AttnParams& params);

// The metrics and the verdict of one output (rows [nTokens, Hq, D] in the dtype's values) against
// the golden, with the baseline's output setting the limits. `dut` names the row. The params give
// the problem's shape and schedule (its pointers to inputs are not read).
ResultRow judge(const AttnParams& params, const Tolerance& tolerance, const std::string& dut, std::span<const float> out,
                std::span<const double> golden, std::span<const float> baseline);

}  // namespace swa::harness
