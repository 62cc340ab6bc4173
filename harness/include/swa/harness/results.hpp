#pragma once
// The rows of a results file: one per scenario, one per (scenario, DUT).
#include <cstdint>
#include <string>

#include "swa/harness/case_schema.hpp"
#include "swa/harness/scenario.hpp"
#include "swa/harness/verdict_enum.hpp"

namespace swa::harness {

// A scenario's columns: its ID and sweep, one column per case parameter (case_schema.hpp), and two
// derived counts.
struct ScenarioRow {
  std::string id, sweep;
  CaseColumns params;
  std::int64_t batch = 0, tokens = 0;
  // The FP8 KV descales the inputs drew (1 without FP8; 0 where no problem was built, or in a file
  // written before these columns).
  double k_descale = 0, v_descale = 0;
  // The pages of a paged cache's pool (paged_pool_pages; 0 without a paged cache, where no problem
  // was built, or in a file written before the column).
  std::int64_t pool_pages = 0;
};

// `params`: the built problem's, which records its FP8 descales; nullptr when none was built.
ScenarioRow scenario_row(const Scenario& s, const AttnParams* params = nullptr);

// status: pass | warn | fail | skip | error (verdict.hpp). Every limit applied is recorded next to
// the numbers.
struct ResultRow {
  std::string scenario_id, dut;
  Verdict status = Verdict::error;
  std::string reason, dtype, mode;
  double max_abs = 0, max_rel = 0, rel_floor = 0, mean_abs = 0, rms = 0, rel_l2 = 0, nmse = 0, cosine = 0,
         mean_ulp = 0;
  std::int64_t max_ulp = 0, over_threshold = 0, nan_count = 0, inf_count = 0;
  std::int64_t worst_seq = -1, worst_token = -1, worst_head = -1, worst_dim = -1, worst_window_edge = 0;
  double baseline_max_abs = 0, baseline_rel_l2 = 0, baseline_mean_ulp = 0;
  double rtol_factor = 0, atol_floor = 0, threshold = 0;
  double run_ms = 0;
  // The per-phase rule (verdict.hpp): the profile and its limits, the phase that came closest to a
  // limit, and the margins there (value / limit: a verdict is pass iff every margin is <= 1).
  std::string profile, worst_phase;
  double l2_factor = 0, l2_floor = 0, warn_l2_factor = 0, nmse_max = 0;
  double max_margin = 0;  // max|err| / threshold, worst phase (threshold above is that phase's)
  double l2_margin = 0;   // rel_l2 / (l2_factor * baseline rel_l2 + l2_floor), worst phase
  double l2_ratio = 0;    // rel_l2 / baseline rel_l2 in that phase (0 when the baseline is exact)
  // Slots (and base / tokens_written values) where the DUT's KV cache differed from the golden cache
  // model, over every chunk and decode step; -1 when not checked (prefill, a DUT with no cache,
  // cache_check off).
  std::int64_t cache_mismatches = -1;
};

}  // namespace swa::harness
