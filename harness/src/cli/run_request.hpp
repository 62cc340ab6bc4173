#pragma once
// What run and submit both take from their command lines: the sweep file and which of its scenarios,
// the DUTs, the tolerance profile, how plugin:, python: and exec: DUTs are hosted, and the golden
// cache. run runs it; submit hands it to every array task as run's own arguments (run_arguments), so
// a task runs what a run with the same options would.
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "swa/harness/case/scenario.hpp"
#include "swa/harness/case/tolerance.hpp"

namespace swa::cli {

struct RunRequest {
  std::string sweep_path;
  std::string sweep, filter, duts_text, profile_text;  // as given; vm.count tells whether they were
  double exec_timeout = 300, dut_timeout = 300;
  std::int64_t dut_memory_mb = 0;
  GoldenCacheArgs golden_cache;
};

// The request's options (the positional sweep file included), with their help lines.
void add_request_options(po::options_description& desc, po::positional_options_description& positional,
                         RunRequest& request);

// --sweep and --filter as select_scenarios takes them.
std::optional<std::string> sweep_option(const po::variables_map& vm, const RunRequest& request);
std::optional<std::string> filter_option(const po::variables_map& vm, const RunRequest& request);

// The request checked before anything runs: the timeouts, the profile, and every DUT it names (--dut's,
// or each selected scenario's sweep's, which must name some). A DUT is made once with `dut_options`
// so a plugin that cannot load is a UsageError here, not an error row per scenario.
struct CheckedRequest {
  std::vector<std::string> duts;  // --dut's, parsed; empty: each scenario's sweep's own
  std::optional<harness::ToleranceProfile> profile;
};
CheckedRequest check_request(const po::variables_map& vm, const RunRequest& request,
                             const std::vector<harness::Scenario>& scenarios, const harness::DutOptions& dut_options);

// How plugin: and python: workers and exec: commands are hosted for `jobs` jobs.
harness::DutOptions dut_options_of(const po::variables_map& vm, const RunRequest& request, int jobs);

// The options of `run` that reproduce the request's DUT, hosting, profile and golden-cache settings
// (--sweep and --filter are the caller's): what each Slurm array task passes to run.
std::vector<std::string> run_arguments(const po::variables_map& vm, const RunRequest& request);

}  // namespace swa::cli
