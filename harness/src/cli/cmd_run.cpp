// swa-harness run: a sweep against its DUTs, into HDF5, JUnit and a console summary.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "commands.hpp"
#include "options.hpp"
#include "run_request.hpp"
#include "swa/harness/base/host.hpp"
#include "swa/harness/base/interrupt.hpp"
#include "swa/harness/base/text.hpp"
#include "swa/harness/base/timing.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/judge/verdict.hpp"
#include "swa/harness/run/ceilings.hpp"
#include "swa/harness/run/meta.hpp"
#include "swa/harness/run/perf.hpp"
#include "swa/harness/run/runner.hpp"
#include "swa/harness/store/junit.hpp"
#include "swa/harness/store/summary.hpp"
#include "swa/platform/terminal.hpp"

namespace swa::cli {
namespace {

namespace fs = std::filesystem;

// run's own options, beside the request's.
struct RunArgs {
  std::string out = "results.h5", junit, shard, dump = "failures";
  int jobs = 1, perf_repeats = 5;
  std::int64_t memory_limit_mb = 0, max_scenarios = harness::SweepLoadOptions{}.max_scenarios;
};

void add_run_options(po::options_description& desc, RunArgs& a) {
  desc.add_options()
      ("out", po::value(&a.out)->default_value(a.out), "results HDF5 file")
      ("junit", po::value(&a.junit), "also write JUnit XML here")
      ("resume", "keep the rows already in --out and run only what is missing")
      ("force", "replace --out or --junit even when the file there is not a results or JUnit file; --resume a file "
                "written from another sweep text")
      ("jobs", po::value(&a.jobs)->default_value(1), "scenarios run in parallel")
      ("shard", po::value(&a.shard), "K/N: every N-th scenario from the K-th (0 <= K < N)")
      ("dump", po::value(&a.dump)->default_value(a.dump), "failures|all: when to dump tensors to /dumps")
      ("in-process", "load plugin: and python: DUTs into this process (for gdb, pdb) instead of a worker; a crash ends the run")
      ("no-cache-check", "do not compare the DUTs' KV caches with the golden cache model (for private cache layouts)")
      ("perf", "also time every DUT per scenario (warm-ups, then the median) into /perf; runs one job")
      ("perf-repeats", po::value(&a.perf_repeats)->default_value(5), "timed repeats in perf mode")
      ("memory-limit-mb", po::value(&a.memory_limit_mb)->default_value(0), "refuse larger scenarios (0: half the RAM)")
      ("max-scenarios", po::value(&a.max_scenarios)->default_value(a.max_scenarios),
       "refuse sweep files that expand to more scenarios");
}

// Ctrl-C prints the command that finishes the run: this one with --resume.
void tell_how_to_resume(const std::vector<std::string>& args) {
  std::string again = harness::shell_quote(harness::command_word("swa-harness")) + " run";
  for (const auto& a : args) again += " " + harness::shell_quote(a);
  if (std::find(args.begin(), args.end(), "--resume") == args.end()) again += " --resume";
  harness::install_interrupt_handler("continue with: " + again);
}

// No scenario selected is bad input, except in an empty shard of a larger array (a CI array can have
// more shards than scenarios): that runs nothing.
void refuse_empty_selection(const po::variables_map& vm, const RunRequest& request, const harness::SweepFile& file,
                            const std::string& shard_text) {
  const harness::Shard shard = parse_shard(shard_text);
  if (shard.count <= 1 ||
      harness::select_scenarios(file, sweep_option(vm, request), filter_option(vm, request), {0, 1}).empty())
    throw UsageError("no scenario selected (check --sweep and --filter)");
  std::cerr << "shard " << shard_text << " holds no scenario (there are fewer scenarios than shards): nothing to run\n";
}

// A timed run runs one job, against the same run's SGEMM and STREAM triad ceilings.
void measure_ceilings(harness::RunOptions& options) {
  if (options.jobs > 1) std::cerr << "perf mode: running one scenario at a time so timings do not compete\n";
  options.jobs = 1;
  options.ceiling_gflops = harness::sgemm_ceiling_gflops(2048, 1, 3);
  std::cerr << "perf ceiling: SGEMM 2048^3 (" << harness::cpu_sgemm_name() << ") = " << options.ceiling_gflops << " GFLOP/s\n";
  // The bandwidth roof of the report's roofline, beside the compute one: 16 Mi doubles per array
  // (384 MiB in all), past any last-level cache.
  options.triad_gbs = harness::triad_bandwidth_gbs(std::int64_t{1} << 24, 1, 3);
  std::cerr << "perf ceiling: STREAM triad (16 Mi doubles per array) = " << options.triad_gbs << " GB/s\n";
}

// One run, its inputs checked: the results file (resumed or new), the scenarios, the JUnit file and the
// console summary. Returns the exit status.
struct SweepRun {
  std::string sweep_path, out, junit;  // junit empty: none
  const harness::SweepFile* file = nullptr;
  std::vector<harness::Scenario> scenarios;
  harness::RunOptions options;
  std::string command;  // for /meta
  bool resume = false, force = false, commit_every_scenario = false;
};

int finish(const SweepRun& run, harness::ResultsStore& store, const harness::RunOutcome& outcome);

int run_sweep(const SweepRun& run) {
  // /meta names the sweep file absolutely: the report's rerun lines paste from any folder.
  harness::ResultsStore store(run.out,
                              harness::collect_meta(fs::absolute(run.sweep_path).lexically_normal().string(),
                                                    run.file->text, run.command),
                              run.resume, run.force);
  // A plugin in this process can kill it mid-call: then every finished scenario must already be in the file.
  if (run.commit_every_scenario)
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
  if (run.resume && store.scenarios_stored() > 0)
    std::cerr << "resuming " << run.out << ": " << store.scenarios_stored()
              << " scenarios already stored are kept; running what is missing\n";
  const harness::RunOutcome outcome = harness::run_scenarios(run.scenarios, store, run.options, std::cerr);
  if (run.options.golden_cache) std::cerr << golden_cache_summary(*run.options.golden_cache) << "\n";
  return finish(run, store, outcome);
}

std::map<std::string, std::string> console_labels_of(const std::vector<harness::ResultRow>& rows) {
  std::vector<std::string> names;
  for (const auto& r : rows)
    if (std::find(names.begin(), names.end(), r.dut) == names.end()) names.push_back(r.dut);
  const std::vector<std::string> labels = harness::console_labels(names);
  std::map<std::string, std::string> label_of;
  for (std::size_t i = 0; i < names.size(); ++i) label_of[names[i]] = labels[i];
  return label_of;
}

int finish(const SweepRun& run, harness::ResultsStore& store, const harness::RunOutcome& outcome) {
  const auto rows = store.results();
  std::string junit_error;
  if (!run.junit.empty()) try {
      harness::write_junit(run.junit, run.sweep_path, rows);
    } catch (const std::runtime_error& e) {
      junit_error = e.what();
    }
  // The printed commands name both files absolutely: they paste from any folder.
  harness::print_summary(std::cout, rows, fs::absolute(run.sweep_path).lexically_normal().string(),
                         console_labels_of(rows), {harness::command_word("swa-harness"), fs::absolute(run.out).string()});
  std::cout << "results: " << run.out << (!run.junit.empty() && junit_error.empty() ? ", junit: " + run.junit : std::string())
            << "\n";
  if (!junit_error.empty()) std::cerr << "swa-harness: JUnit not written: " << junit_error << "\n";
  if (!outcome.storage_error.empty()) {
    std::cerr << "swa-harness: stopped: the results could not be stored: " << outcome.storage_error << "\n"
              << "  " << run.out << " holds the " << store.scenarios_stored()
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

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  RunRequest request;
  RunArgs a;
  po::options_description desc(
      "swa-harness run SWEEP.yaml: run the sweep's scenarios against DUTs\nexit status: 0 all pass, 1 some fail, 2 "
      "invalid input or internal error, 3 the results could not be stored (a full disk; --resume finishes)");
  po::positional_options_description positional;
  add_request_options(desc, positional, request);
  add_run_options(desc, a);
  po::variables_map vm;
  if (!parse_options("run", args, desc, vm, &positional)) return kOk;
  tell_how_to_resume(args);
  require_range("--jobs", a.jobs, 1, 256);
  require_range("--memory-limit-mb", a.memory_limit_mb, 0, std::int64_t{1} << 30);
  if (a.dump != "failures" && a.dump != "all") throw UsageError("option --dump: '" + a.dump + "' is not one of failures|all");
  require_range("--max-scenarios", a.max_scenarios, 1, std::int64_t{1} << 40);
  SweepRun run;
  run.sweep_path = request.sweep_path;
  run.out = a.out;
  if (vm.count("junit")) run.junit = a.junit;
  run.force = vm.count("force") > 0;
  guard_output("--out", a.out, OutputKind::results, run.force, {{"the sweep file", run.sweep_path}, {"--junit", a.junit}});
  if (vm.count("junit")) guard_output("--junit", a.junit, OutputKind::junit, run.force, {{"the sweep file", run.sweep_path}});
  const harness::SweepFile file = load_sweep_or_usage_error(run.sweep_path, {a.memory_limit_mb << 20, a.max_scenarios});
  run.file = &file;
  run.scenarios = harness::select_scenarios(file, sweep_option(vm, request), filter_option(vm, request), parse_shard(a.shard));
  harness::RunOptions& options = run.options;
  options.dut_options = dut_options_of(vm, request, a.jobs);
  options.jobs = a.jobs;
  if (vm.count("perf")) options.perf = harness::PerfSettings{1, static_cast<int>(require_range("--perf-repeats", a.perf_repeats, 1, 1000))};
  if (options.perf || std::any_of(run.scenarios.begin(), run.scenarios.end(), [](const auto& s) { return s.perf.has_value(); }))
    measure_ceilings(options);
  options.cache_check = vm.count("no-cache-check") == 0;
  const std::unique_ptr<harness::GoldenCache> golden_cache = open_golden_cache(vm, request.golden_cache);
  options.golden_cache = golden_cache.get();
  options.dump = a.dump == "all" ? harness::DumpPolicy::all : harness::DumpPolicy::failures;
  options.progress_on_terminal = ::isatty(STDERR_FILENO);
  options.progress_columns = [] { return platform::terminal_columns(STDERR_FILENO).value_or(80); };
  // Every DUT named anywhere must exist before anything runs (--dut's even when a shard is empty).
  const CheckedRequest checked = check_request(vm, request, run.scenarios, options.dut_options);
  options.duts = checked.duts;
  options.profile = checked.profile;
  if (run.scenarios.empty()) refuse_empty_selection(vm, request, file, a.shard);
  run.command = "swa-harness run";
  for (const auto& arg : args) run.command += " " + arg;
  run.resume = vm.count("resume") > 0;
  run.commit_every_scenario = vm.count("in-process") > 0;
  return run_sweep(run);
}

}  // namespace swa::cli
