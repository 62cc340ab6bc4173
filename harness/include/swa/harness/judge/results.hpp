#pragma once
// The rows of a results file, built here alone: one per scenario, one per (scenario, DUT), one per timed
// (scenario, DUT).
#include <cstdint>
#include <string>

#include "swa/harness/base/timing.hpp"
#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/case/scenario.hpp"
#include "swa/harness/case/tolerance.hpp"
#include "swa/harness/judge/verdict_enum.hpp"

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
  // The DUT's identity across runs (dut_label() below): what report --compare pairs rows by. And the
  // canonical path of the DUT's file (plugin, python: file, exec: program), empty for a built-in or
  // a module, or in a file written before the column.
  std::string dut_label, dut_path;
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

// A DUT's label: the same whichever way its path was typed (relative, absolute, through a symlinked
// folder; from the command line or from the Python module). The console label (LABEL=) is dropped;
// plugin:PATH is plugin:<file name>; python:TARGET:FUNCTION[:key=value...] keeps the function and
// the items, a .py TARGET by its file name (a module by its dotted name); exec:COMMAND is its words,
// as the shell splits them, each one holding '/' by its final component (--lib=/a/b.so: --lib=b.so),
// joined by one space; a built-in DUT (cpu, baseline, cuda, mutant:FAULT) is its name.
std::string dut_label(const std::string& dut);
// The canonical absolute path of a DUT's file (plugin:, a python: .py TARGET, an exec: program named
// with a '/'), resolved from the working folder; empty for the others.
std::string dut_path(const std::string& dut);
// The DUT's name as a command pasted in another folder must give it: a plugin: or python: file by its
// absolute path (python:/home/me/mine.py:attention), the console label kept; any other name as it is
// (an exec: command is the user's shell text, run as typed).
std::string dut_from_anywhere(const std::string& dut);

// A row's columns that every (scenario, DUT) has, judged or not: the DUT, the case's dtype and mode,
// and the profile with its element limits. judge() (verdict.hpp) fills in the rest.
ResultRow result_row(const std::string& scenario_id, const std::string& dut, DType dtype, RunMode mode,
                     const Tolerance& tolerance);

// One timed case: a row of /perf (run --perf) and of swa-bench's table and CSV. The shape columns are
// what the FLOP and byte counts depend on; a scenario's every parameter is in /scenarios by its ID.
struct PerfRow {
  std::string scenario_id, dut, mode, dtype, cache;
  std::string dut_label;  // dut_label(dut), as in /results
  std::int64_t tokens = 0, window = 0, head_size = 0, heads = 0, kv_heads = 0, batch = 0, repeats = 0;
  std::int64_t pairs = 0;     // attended (query, key) pairs per timed unit, counted exactly
  std::int64_t kv_bytes = 0;  // KV cache bytes the DUT holds (K/V input bytes for prefill)
  double time_ms = 0, min_ms = 0, max_ms = 0;  // median and spread; decode: per step
  double gflops = 0;                            // 4 * D * pairs * Hq / time
  double ceiling_gflops = 0;                    // same-run ceiling
  double ceiling_fraction = 0;
  std::string ceiling;                          // what the ceiling is
  double triad_gbs = 0;  // same-run STREAM triad (GB/s): the bandwidth roof of a roofline; 0: not measured
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

}  // namespace swa::harness
