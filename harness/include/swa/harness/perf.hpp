#pragma once
// Perf mode: each DUT timed per scenario, warm-ups then repeats, the median and the spread, next to
// a ceiling measured in the same run.
#include <cstdint>
#include <string>

#include "swa/dut/dut.hpp"
#include "swa/harness/problem.hpp"
#include "swa/harness/scenario.hpp"
#include "swa/harness/timing.hpp"

namespace swa::harness {

// One timed case: a row of /perf (run --perf) and of swa-bench's table and CSV. The shape columns are
// what the FLOP and byte counts depend on; a scenario's every parameter is in /scenarios by its ID.
struct PerfRow {
  std::string scenario_id, dut, mode, dtype, cache;
  std::int64_t tokens = 0, window = 0, head_size = 0, heads = 0, kv_heads = 0, batch = 0, repeats = 0;
  std::int64_t pairs = 0;     // attended (query, key) pairs per timed unit, counted exactly
  std::int64_t kv_bytes = 0;  // KV cache bytes the DUT holds (K/V input bytes for prefill)
  double time_ms = 0, min_ms = 0, max_ms = 0;  // median and spread; decode: per step
  double gflops = 0;                            // 4 * D * pairs * Hq / time
  double ceiling_gflops = 0;                    // same-run ceiling
  double ceiling_fraction = 0;
  std::string ceiling;                          // what the ceiling is
  std::string timer;  // "host wall clock", "DUT's own timing" (run --perf: its kernels alone), "device events" (swa-bench cuda)

  void set_timing(const Timing& t) {
    time_ms = t.median_ms;
    min_ms = t.min_ms;
    max_ms = t.max_ms;
    repeats = t.repeats;
  }
  void set_ceiling(double gflops_ceiling, std::string what) {
    ceiling_gflops = gflops_ceiling;
    ceiling_fraction = gflops_ceiling > 0 ? gflops / gflops_ceiling : 0;
    ceiling = std::move(what);
  }
};

// Times `dut` on the problem's schedule. prefill and chunked_prefill: the whole schedule. decode:
// the decode steps alone, per step (the prompt is replayed untimed before each repeat). A DUT that
// times its own kernels (Dut::last_kernel_ms, the CUDA DUT) is timed by those, without its
// host<->device copies; any other by the host wall clock.
PerfRow time_dut(const Scenario& s, const Problem& pr, dut::Dut& dut, const PerfSettings& settings, double ceiling);

}  // namespace swa::harness
