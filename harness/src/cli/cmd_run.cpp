// swa-harness run: a sweep against its DUTs, into HDF5, JUnit and a console summary.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/harness/run/ceilings.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/base/interrupt.hpp"
#include "swa/harness/store/junit.hpp"
#include "swa/harness/run/perf.hpp"
#include "swa/harness/base/timing.hpp"
#include "swa/harness/run/meta.hpp"
#include "swa/harness/run/runner.hpp"
#include "swa/harness/store/summary.hpp"
#include "swa/harness/base/host.hpp"
#include "swa/harness/base/text.hpp"
#include "swa/harness/judge/verdict.hpp"
#include "swa/platform/terminal.hpp"

namespace swa::cli {

int cmd_run(const std::vector<std::string>& args) {
  std::string path, sweep, filter, duts_text, out = "results.h5", junit, shard_text, dump_text = "failures", profile_text;
  int jobs = 1, perf_repeats = 5;
  double exec_timeout = 300, dut_timeout = 300;
  std::int64_t memory_limit_mb = 0, dut_memory_mb = 0;
  std::int64_t max_scenarios = harness::SweepLoadOptions{}.max_scenarios;
  GoldenCacheArgs golden_cache_args;
  po::options_description desc(
      "swa-harness run SWEEP.yaml: run the sweep's scenarios against DUTs\nexit status: 0 all pass, 1 some fail, 2 "
      "invalid input or internal error, 3 the results could not be stored (a full disk; --resume finishes)");
  desc.add_options()
      ("sweep-file", po::value(&path)->required(), "the sweep file (positional)")
      ("sweep", po::value(&sweep), "only this named sweep (default: every sweep of the file)")
      ("filter", po::value(&filter), "an exact scenario ID, or a regex searched in the IDs")
      ("dut", po::value(&duts_text), harness::dut_option_help().c_str())
      ("out", po::value(&out)->default_value(out), "results HDF5 file")
      ("junit", po::value(&junit), "also write JUnit XML here")
      ("resume", "keep the rows already in --out and run only what is missing")
      ("force", "replace --out or --junit even when the file there is not a results or JUnit file; --resume a file "
                "written from another sweep text")
      ("jobs", po::value(&jobs)->default_value(1), "scenarios run in parallel")
      ("shard", po::value(&shard_text), "K/N: every N-th scenario from the K-th (0 <= K < N)")
      ("dump", po::value(&dump_text)->default_value(dump_text), "failures|all: when to dump tensors to /dumps")
      ("exec-timeout", po::value(&exec_timeout)->default_value(300), "seconds an exec: DUT may run per scenario")
      ("dut-timeout", po::value(&dut_timeout)->default_value(300),
       "seconds one call of a plugin: or python: DUT may take in its worker process; over it the call is an error row")
      ("dut-memory-mb", po::value(&dut_memory_mb)->default_value(0), kDutMemoryHelp)
      ("in-process", "load plugin: and python: DUTs into this process (for gdb, pdb) instead of a worker; a crash ends the run")
      ("tolerance-profile", po::value(&profile_text), ("strict|default|loose: replaces the sweeps' tolerances (harness/README.md)"))
      ("no-cache-check", "do not compare the DUTs' KV caches with the golden cache model (for private cache layouts)")
      ("perf", "also time every DUT per scenario (warm-ups, then the median) into /perf; runs one job")
      ("perf-repeats", po::value(&perf_repeats)->default_value(5), "timed repeats in perf mode")
      ("memory-limit-mb", po::value(&memory_limit_mb)->default_value(0), "refuse larger scenarios (0: half the RAM)")
      ("max-scenarios", po::value(&max_scenarios)->default_value(max_scenarios), "refuse sweep files that expand to more scenarios");
  add_golden_cache_options(desc, golden_cache_args);
  po::positional_options_description positional;
  positional.add("sweep-file", 1);
  po::variables_map vm;
  if (!parse_options("run", args, desc, vm, &positional)) return kOk;
  {
    std::string again = harness::shell_quote(harness::command_word("swa-harness")) + " run";
    for (const auto& a : args) again += " " + harness::shell_quote(a);
    if (std::find(args.begin(), args.end(), "--resume") == args.end()) again += " --resume";
    harness::install_interrupt_handler("continue with: " + again);
  }
  require_range("--jobs", jobs, 1, 256);
  require_range("--memory-limit-mb", memory_limit_mb, 0, std::int64_t{1} << 30);
  if (dump_text != "failures" && dump_text != "all") throw UsageError("option --dump: '" + dump_text + "' is not one of failures|all");

  require_range("--max-scenarios", max_scenarios, 1, std::int64_t{1} << 40);
  const bool force = vm.count("force") > 0;
  guard_output("--out", out, OutputKind::results, force, {{"the sweep file", path}, {"--junit", junit}});
  if (vm.count("junit")) guard_output("--junit", junit, OutputKind::junit, force, {{"the sweep file", path}});
  const harness::SweepFile file = load_sweep_or_usage_error(path, {memory_limit_mb << 20, max_scenarios});
  const auto scenarios = harness::select_scenarios(file, vm.count("sweep") ? std::optional(sweep) : std::nullopt,
                                                   vm.count("filter") ? std::optional(filter) : std::nullopt,
                                                   parse_shard(shard_text));
  if (!(exec_timeout > 0)) throw UsageError("option --exec-timeout must be > 0 seconds");
  if (!(dut_timeout > 0)) throw UsageError("option --dut-timeout must be > 0 seconds");
  harness::RunOptions options;
  options.dut_options = {exec_timeout, vm.count("in-process") > 0, dut_timeout,
                         worker_memory_from_option(dut_memory_mb, jobs)};
  options.jobs = jobs;
  if (vm.count("perf")) options.perf = harness::PerfSettings{1, static_cast<int>(require_range("--perf-repeats", perf_repeats, 1, 1000))};
  const bool timing = options.perf || std::any_of(scenarios.begin(), scenarios.end(), [](const auto& s) { return s.perf.has_value(); });
  if (timing) {
    if (jobs > 1) std::cerr << "perf mode: running one scenario at a time so timings do not compete\n";
    options.jobs = 1;
    options.ceiling_gflops = harness::sgemm_ceiling_gflops(2048, 1, 3);
    std::cerr << "perf ceiling: SGEMM 2048^3 (" << harness::cpu_sgemm_name() << ") = " << options.ceiling_gflops << " GFLOP/s\n";
    // The bandwidth roof of the report's roofline, beside the compute one: 16 Mi doubles per array
    // (384 MiB in all), past any last-level cache.
    options.triad_gbs = harness::triad_bandwidth_gbs(std::int64_t{1} << 24, 1, 3);
    std::cerr << "perf ceiling: STREAM triad (16 Mi doubles per array) = " << options.triad_gbs << " GB/s\n";
  }
  options.cache_check = vm.count("no-cache-check") == 0;
  const std::unique_ptr<harness::GoldenCache> golden_cache = open_golden_cache(vm, golden_cache_args);
  options.golden_cache = golden_cache.get();
  if (vm.count("tolerance-profile")) {
    options.profile = harness::parse_profile(profile_text);
    if (!options.profile)
      throw UsageError("option --tolerance-profile: '" + profile_text + "' is not one of " + harness::profile_choices());
  }
  options.dump = dump_text == "all" ? harness::DumpPolicy::all : harness::DumpPolicy::failures;
  options.progress_on_terminal = ::isatty(STDERR_FILENO);
  options.progress_columns = [] { return platform::terminal_columns(STDERR_FILENO).value_or(80); };
  if (vm.count("dut")) options.duts = parse_dut_option(duts_text);
  // Every DUT named anywhere must exist before anything runs (--dut's even when a shard is empty).
  std::set<std::string> checked;
  auto check_dut = [&](const std::string& d, const std::string& named_by) {
    if (checked.insert(d).second) require_dut_exists(d, named_by, options.dut_options);
  };
  for (const auto& d : options.duts) check_dut(d, "option --dut: ");
  if (options.duts.empty())
    for (const auto& s : scenarios)
      for (const auto& d : s.duts) check_dut(d, "sweep " + s.sweep + " duts: ");

  const harness::Shard shard = parse_shard(shard_text);
  // A CI array can have more shards than scenarios: an empty shard is no error, it runs nothing.
  const bool empty_shard =
      scenarios.empty() && shard.count > 1 &&
      !harness::select_scenarios(file, vm.count("sweep") ? std::optional(sweep) : std::nullopt,
                                 vm.count("filter") ? std::optional(filter) : std::nullopt, {0, 1})
           .empty();
  if (scenarios.empty() && !empty_shard) throw UsageError("no scenario selected (check --sweep and --filter)");
  if (empty_shard)
    std::cerr << "shard " << shard_text << " holds no scenario (there are fewer scenarios than shards): nothing to run\n";
  for (const auto& s : scenarios)
    if (s.duts.empty() && options.duts.empty())
      throw UsageError("sweep " + s.sweep + " names no duts: add 'duts:' to it or pass --dut");

  std::string command = "swa-harness run";
  for (const auto& a : args) command += " " + a;
  // /meta names the sweep file absolutely: the report's rerun lines paste from any folder.
  harness::ResultsStore store(out, harness::collect_meta(std::filesystem::absolute(path).lexically_normal().string(), file.text, command),
                              vm.count("resume") > 0, force);
  // A plugin in this process can kill it mid-call: then every finished scenario must already be in the file.
  if (vm.count("in-process"))
    store.commit_every_scenario();
  else
    store.commit_in_background();  // a rewrite of the file never holds up the DUT (results_store.hpp)
  harness::set_interrupt_flush([&store]() -> std::string {
    try {
      store.flush_and_close();
      return {};
    } catch (const harness::ResultsNotWritten& e) {
      return e.what();
    }
  });
  struct ForgetFlush {
    ~ForgetFlush() { harness::set_interrupt_flush({}); }
  } forget_flush;
  if (vm.count("resume") && store.scenarios_stored() > 0)
    std::cerr << "resuming " << out << ": " << store.scenarios_stored()
              << " scenarios already stored are kept; running what is missing\n";
  const harness::RunOutcome outcome = harness::run_scenarios(scenarios, store, options, std::cerr);

  if (golden_cache) std::cerr << golden_cache_summary(*golden_cache) << "\n";
  const auto rows = store.results();
  std::string junit_error;
  if (vm.count("junit")) try {
      harness::write_junit(junit, path, rows);
    } catch (const std::runtime_error& e) {
      junit_error = e.what();
    }
  std::vector<std::string> names;
  for (const auto& r : rows)
    if (std::find(names.begin(), names.end(), r.dut) == names.end()) names.push_back(r.dut);
  const std::vector<std::string> labels = harness::console_labels(names);
  std::map<std::string, std::string> label_of;
  for (std::size_t i = 0; i < names.size(); ++i) label_of[names[i]] = labels[i];
  // The printed commands name both files absolutely: they paste from any folder.
  harness::print_summary(std::cout, rows, std::filesystem::absolute(path).lexically_normal().string(), label_of,
                         {harness::command_word("swa-harness"), std::filesystem::absolute(out).string()});
  std::cout << "results: " << out << (vm.count("junit") && junit_error.empty() ? ", junit: " + junit : std::string()) << "\n";
  if (!junit_error.empty()) std::cerr << "swa-harness: JUnit not written: " << junit_error << "\n";
  if (!outcome.storage_error.empty()) {
    std::cerr << "swa-harness: stopped: the results could not be stored: " << outcome.storage_error << "\n"
              << "  " << out << " holds the " << store.scenarios_stored()
              << " scenarios stored before, unchanged; these ran but are not in it: ";
    for (std::size_t i = 0; i < outcome.not_stored.size(); ++i) std::cerr << (i ? ", " : "") << outcome.not_stored[i];
    std::cerr << ".\n  Make room (or fix the folder) and run the same command with --resume to finish.\n";
    return kNotStored;
  }
  if (!junit_error.empty()) return kNotStored;
  for (const auto& r : rows)
    if (harness::is_failure(r.status)) return kCheckFailed;
  return kOk;
}

}  // namespace swa::cli
