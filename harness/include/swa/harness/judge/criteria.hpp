#pragma once
// The verdict's criteria as a table: each compares a measure of the DUT's error on a phase's rows with
// a limit set by the tolerance and the same-precision baseline's error on the same rows. judge()
// (verdict.hpp) applies the table to every phase and words what it finds; a new criterion is a row.
#include <array>
#include <span>
#include <string>
#include <string_view>

#include "swa/harness/case/tolerance.hpp"
#include "swa/harness/judge/metrics.hpp"
#include "swa/harness/judge/verdict_enum.hpp"

namespace swa::harness {

enum class CriterionId { max_abs, rel_l2, nmse, warn_rel_l2 };

struct Criterion {
  CriterionId id;
  std::string_view name;
  Verdict when_over;  // what exceeding the limit makes of a phase: fail, or warn (only where nothing fails)
  bool (*applies)(const Tolerance&);
  double (*measure)(const ErrorNorms& errors);
  double (*limit)(const Tolerance&, const ErrorNorms& baseline);
};

// In the order their failures are worded.
extern const std::array<Criterion, 4> kCriteria;
const Criterion& criterion(CriterionId id);

// One criterion over a schedule's phases: the phase where measure / limit (the margin) is largest,
// the first such phase on a tie. Over the limit means margin > 1.
struct CriterionOutcome {
  const Criterion* criterion = nullptr;
  bool applied = false;
  std::size_t phase = 0;
  double margin = 0, measured = 0, limit = 0, baseline_measured = 0;
  bool over() const { return applied && margin > 1; }
};

// `dut` and `baseline` hold one entry per phase, in the same order (at least one).
CriterionOutcome assess(const Criterion& c, const Tolerance& tolerance, std::span<const ErrorNorms> dut,
                        std::span<const ErrorNorms> baseline);

// The verdict of a finite output from the outcomes: fail if any failing criterion is over, else warn
// if a warning one is, else pass.
Verdict verdict_of(std::span<const CriterionOutcome> outcomes);

}  // namespace swa::harness
