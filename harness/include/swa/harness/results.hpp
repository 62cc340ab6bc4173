#pragma once
// The rows of a results file: one per scenario, one per (scenario, DUT).
#include <cstdint>
#include <string>

#include "swa/harness/scenario.hpp"

namespace swa::harness {

struct ScenarioRow {
  std::string id, sweep, mode, dtype, cache, mask, inputs, seq_lens;
  std::int64_t heads = 0, kv_heads = 0, head_size = 0, window = 0, chunk = 0, decode_steps = 0, seed = 0,
               batch = 0, tokens = 0;
};

ScenarioRow scenario_row(const Scenario& s);

// status: pass | fail | skip | error. Every threshold applied is recorded next to the numbers.
struct ResultRow {
  std::string scenario_id, dut, status, reason, dtype, mode;
  double max_abs = 0, max_rel = 0, rel_floor = 0, mean_abs = 0, rms = 0, rel_l2 = 0, nmse = 0, cosine = 0,
         mean_ulp = 0;
  std::int64_t max_ulp = 0, over_threshold = 0, nan_count = 0, inf_count = 0;
  std::int64_t worst_seq = -1, worst_token = -1, worst_head = -1, worst_dim = -1, worst_window_edge = 0;
  double baseline_max_abs = 0, baseline_rel_l2 = 0, baseline_mean_ulp = 0;
  double rtol_factor = 0, atol_floor = 0, threshold = 0;
  double run_ms = 0;
};

}  // namespace swa::harness
