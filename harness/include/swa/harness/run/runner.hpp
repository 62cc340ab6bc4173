#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "swa/harness/case/scenario.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/store/results_store.hpp"

namespace swa::harness {

class GoldenCache;
struct Reference;

enum class DumpPolicy { failures, all };

struct RunOptions {
  std::vector<std::string> duts;  // when non-empty, replaces each scenario's sweep-level DUT list
  int jobs = 1;
  DumpPolicy dump = DumpPolicy::failures;
  bool progress_on_terminal = false;
  std::function<int()> progress_columns;  // the terminal's width, asked at each update (run/progress.hpp)
  std::optional<PerfSettings> perf;  // --perf: time every scenario, over the sweep's own perf settings
  double ceiling_gflops = 0;          // measured once per run when anything is timed
  double triad_gbs = 0;               // the same run's STREAM triad (GB/s), measured with it; in each /perf row
  std::optional<ToleranceProfile> profile;  // --tolerance-profile: replaces every scenario's tolerances
  bool cache_check = true;            // --no-cache-check turns the cache comparison off for every scenario
  GoldenCache* golden_cache = nullptr;  // read goldens from here and store them (golden_cache.hpp)
  DutOptions dut_options;               // how exec: and plugin: DUTs run (--exec-timeout, --dut-timeout, --in-process)
};

// Runs one scenario against its DUTs: inputs from the seed, golden, baseline, then each DUT on a
// NaN-poisoned output; metrics and verdict per DUT. (scenario, DUT) pairs already in `store` are
// skipped. Never throws for a DUT's failure: that is a row with status error.
// The rows come back with their ticket: they are in the file once store.committed_ticket() reaches it.
// `prepared`: the scenario's Reference when it was built ahead (run_scenarios); else it is built here.
ResultsStore::Added run_scenario(const Scenario& s, const std::vector<std::string>& duts, ResultsStore& store,
                                 const RunOptions& options, std::unique_ptr<Reference> prepared = nullptr);

struct RunOutcome {
  std::string storage_error;            // why the results file could not be written; empty: it always could
  std::vector<std::string> not_stored;  // scenarios that ran but are not in the file (rerun with --resume)
};

// All scenarios, `jobs` at a time, adding to `store` as each finishes (committed at the end). Results do not depend on
// `jobs`. Each job builds its next scenario's Reference (inputs, golden: read or computed) on a thread
// of its own while the current scenario's DUTs run, except around a timed (perf) scenario, so that the
// harness's own work overlaps the DUT's. Progress goes to `progress`. When the results file cannot be written, no new scenario
// starts and the outcome says why.
RunOutcome run_scenarios(const std::vector<Scenario>& scenarios, ResultsStore& store, const RunOptions& options,
                         std::ostream& progress);

}  // namespace swa::harness
