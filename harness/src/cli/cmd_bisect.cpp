// swa-harness bisect: a failing scenario into a diagnosis and a minimal reproduction.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/harness/bisect/bisect.hpp"
#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/store/results_file.hpp"

namespace swa::cli {
namespace {

// A scenario rebuilt from its /scenarios row, judged with the thresholds its /results rows recorded.
harness::Scenario scenario_from_results(const std::string& path, const std::string& id) {
  const harness::ResultsContents c = harness::read_results(path);
  const auto row = std::find_if(c.scenarios.begin(), c.scenarios.end(), [&](const auto& s) { return s.id == id; });
  if (row == c.scenarios.end()) throw UsageError("option --id: no scenario '" + id + "' in " + path);
  harness::Scenario s;
  if (const auto error = harness::scenario_from_columns(row->params, s))
    throw UsageError("results file " + path + ": scenario " + id + ": " + *error);
  s.sweep = row->sweep;
  s.tolerance = harness::tolerance_for(harness::ToleranceProfile::standard, s.dtype);
  // The limits the run applied, as recorded in its row (files before profiles recorded only the first two).
  for (const auto& r : c.results) {
    if (r.scenario_id != id || (r.rtol_factor <= 0 && r.nmse_max <= 0)) continue;
    if (const auto profile = harness::parse_profile(r.profile)) s.tolerance = harness::tolerance_for(*profile, s.dtype);
    s.tolerance.rtol_factor = r.rtol_factor;
    s.tolerance.atol_floor = r.atol_floor;
    if (!r.profile.empty()) {
      s.tolerance.l2_factor = r.l2_factor;
      s.tolerance.l2_floor = r.l2_floor;
      s.tolerance.warn_l2_factor = r.warn_l2_factor;
      s.tolerance.nmse_max = r.nmse_max;
    }
  }
  if (s.id() != id) throw UsageError("results file " + path + ": scenario row does not rebuild ID " + id);
  return s;
}

// The scenarios a results file lists before `id` (the run's order), nearest last, those its rows rebuild.
std::vector<harness::Scenario> scenarios_before(const std::string& path, const std::string& id) {
  const harness::ResultsContents c = harness::read_results(path);
  const auto row = std::find_if(c.scenarios.begin(), c.scenarios.end(), [&](const auto& s) { return s.id == id; });
  std::vector<harness::Scenario> out;
  for (auto it = row; it != c.scenarios.begin() && out.size() < harness::BisectOptions::kRanBefore;) {
    --it;
    harness::Scenario s;
    if (harness::scenario_from_columns(it->params, s)) continue;
    s.sweep = it->sweep;
    if (s.id() == it->id) out.insert(out.begin(), s);
  }
  return out;
}

}  // namespace

int cmd_bisect(const std::vector<std::string>& args) {
  std::string path, from, id, filter;
  harness::BisectOptions o;
  std::string out_dir = "bisect-out";
  double dut_timeout = 300;
  std::int64_t dut_memory_mb = 0;
  po::options_description desc(
      "swa-harness bisect (--from results.h5 --id ID | SWEEP.yaml --filter ID) --dut NAME [--against golden|DUT] "
      "[--out DIR] [--json]\nReproduce, localize, diagnose, reduce, recover, and write DIR/report.txt, DIR/summary.json, "
      "DIR/repro.yaml, DIR/repro.h5.\n"
      "exit status: 0 does not reproduce, 1 reproduces, 2 invalid input");
  desc.add_options()
      ("sweep-file", po::value(&path), "the sweep file (positional), with --filter")
      ("filter", po::value(&filter), "the scenario ID (exactly one scenario must match)")
      ("from", po::value(&from), "a results file, with --id")
      ("id", po::value(&id), "the scenario ID in --from")
      ("dut", po::value(&o.dut)->required(), "the DUT to bisect")
      ("against", po::value(&o.against)->default_value("golden"), "golden, or a DUT to compare with")
      ("reruns", po::value(&o.reruns)->default_value(3), "runs of the original case (the spread exposes races)")
      ("out", po::value(&out_dir)->default_value(out_dir), "output directory")
      ("dut-timeout", po::value(&dut_timeout)->default_value(300), "seconds one call of a plugin: or python: DUT may take")
      ("dut-memory-mb", po::value(&dut_memory_mb)->default_value(0), kDutMemoryHelp)
      ("json", "print DIR/summary.json (the finding, for CI bots) instead of the report")
      ("in-process", "load plugin: and python: DUTs into this process (for gdb, pdb) instead of a worker");
  po::positional_options_description positional;
  positional.add("sweep-file", 1);
  po::variables_map vm;
  if (!parse_options("bisect", args, desc, vm, &positional)) return kOk;
  require_range("--reruns", o.reruns, 1, 100);
  if (!(dut_timeout > 0)) throw UsageError("option --dut-timeout must be > 0 seconds");
  o.dut_options.plugins_in_process = vm.count("in-process") > 0;
  o.dut_options.plugin_call_timeout_seconds = dut_timeout;
  o.dut_options.worker_memory_bytes = worker_memory_from_option(dut_memory_mb, 1);
  o.out_dir = out_dir;
  o.json = vm.count("json") > 0;
  for (const std::string& d : {o.dut, o.against})
    if (d != "golden") try {
        harness::make_dut(d, o.dut_options);
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("option --dut/--against: ") + e.what());
      }
  harness::Scenario s;
  if (vm.count("from")) {
    if (!vm.count("id")) throw UsageError("option --from needs --id");
    s = scenario_from_results(from, id);
    o.ran_before = scenarios_before(from, id);
    o.sweep_file = from;
  } else {
    if (path.empty() || filter.empty()) throw UsageError("give SWEEP.yaml --filter ID, or --from results.h5 --id ID");
    const auto file = load_sweep_or_usage_error(path);
    const auto picked = harness::select_scenarios(file, std::nullopt, filter, {});
    if (picked.size() != 1)
      throw UsageError("option --filter: matches " + std::to_string(picked.size()) + " scenarios; give one exact ID");
    s = picked.front();
    const auto all = harness::select_scenarios(file, std::nullopt, std::nullopt, {});
    const auto at = std::find_if(all.begin(), all.end(), [&](const harness::Scenario& x) { return x.id() == s.id(); });
    o.ran_before.assign(at - std::min<std::ptrdiff_t>(at - all.begin(), harness::BisectOptions::kRanBefore), at);
    o.sweep_file = path;
  }
  return harness::bisect(s, o, std::cout);
}

}  // namespace swa::cli
