#pragma once
// Perf mode: each DUT timed per scenario, warm-ups then repeats, the median and the spread, next to
// a ceiling measured in the same run.
#include <cstdint>
#include <string>

#include "swa/dut/dut.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/harness/case/scenario.hpp"
#include "swa/harness/base/timing.hpp"
#include "swa/harness/judge/results.hpp"

namespace swa::harness {

// Times `dut` on the problem's schedule. prefill and chunked_prefill: the whole schedule. decode:
// the decode steps alone, per step (the prompt is replayed untimed before each repeat). A DUT that
// times its own kernels (Dut::last_kernel_ms, the CUDA DUT) is timed by those, without its
// host<->device copies; any other by the host wall clock. Call by call: the row's timer names the
// clock ("DUT's own timing", "host wall clock", or "mixed: ..." when its calls differed).
PerfRow time_dut(const Scenario& s, const Problem& pr, dut::Dut& dut, const PerfSettings& settings, double ceiling);

}  // namespace swa::harness
