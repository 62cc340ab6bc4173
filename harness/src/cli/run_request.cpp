#include "run_request.hpp"

#include <filesystem>
#include <set>

namespace swa::cli {

namespace fs = std::filesystem;

void add_request_options(po::options_description& desc, po::positional_options_description& positional,
                         RunRequest& r) {
  desc.add_options()
      ("sweep-file", po::value(&r.sweep_path)->required(), "the sweep file (positional)")
      ("sweep", po::value(&r.sweep), "only this named sweep (default: every sweep of the file)")
      ("filter", po::value(&r.filter), "an exact scenario ID, or a regex searched in the IDs")
      ("dut", po::value(&r.duts_text), harness::dut_option_help().c_str())
      ("tolerance-profile", po::value(&r.profile_text), "strict|default|loose: replaces the sweeps' tolerances (harness/README.md)")
      ("exec-timeout", po::value(&r.exec_timeout)->default_value(300), "seconds an exec: DUT may run per scenario")
      ("dut-timeout", po::value(&r.dut_timeout)->default_value(300),
       "seconds one call of a plugin: or python: DUT may take in its worker process; over it the call is an error row")
      ("dut-memory-mb", po::value(&r.dut_memory_mb)->default_value(0), kDutMemoryHelp);
  add_golden_cache_options(desc, r.golden_cache);
  positional.add("sweep-file", 1);
}

std::optional<std::string> sweep_option(const po::variables_map& vm, const RunRequest& r) {
  return vm.count("sweep") ? std::optional(r.sweep) : std::nullopt;
}

std::optional<std::string> filter_option(const po::variables_map& vm, const RunRequest& r) {
  return vm.count("filter") ? std::optional(r.filter) : std::nullopt;
}

harness::DutOptions dut_options_of(const po::variables_map& vm, const RunRequest& r, int jobs) {
  if (!(r.exec_timeout > 0)) throw UsageError("option --exec-timeout must be > 0 seconds");
  if (!(r.dut_timeout > 0)) throw UsageError("option --dut-timeout must be > 0 seconds");
  return {r.exec_timeout, vm.count("in-process") > 0, r.dut_timeout, worker_memory_from_option(r.dut_memory_mb, jobs)};
}

CheckedRequest check_request(const po::variables_map& vm, const RunRequest& r,
                             const std::vector<harness::Scenario>& scenarios, const harness::DutOptions& dut_options) {
  CheckedRequest checked;
  if (vm.count("tolerance-profile"))
    checked.profile = require_choice("--tolerance-profile", r.profile_text, harness::parse_profile(r.profile_text),
                                     harness::profile_choices());
  std::set<std::string> made;
  auto check_dut = [&](const std::string& d, const std::string& named_by) {
    if (made.insert(d).second) require_dut_exists(d, named_by, dut_options);
  };
  if (vm.count("dut")) {
    checked.duts = parse_dut_option(r.duts_text);
    for (const auto& d : checked.duts) check_dut(d, "option --dut: ");
    return checked;
  }
  for (const auto& s : scenarios) {
    if (s.duts.empty()) throw UsageError("sweep " + s.sweep + " names no duts: add 'duts:' to it or pass --dut");
    for (const auto& d : s.duts) check_dut(d, "sweep " + s.sweep + " duts: ");
  }
  return checked;
}

std::vector<std::string> run_arguments(const po::variables_map& vm, const RunRequest& r) {
  std::vector<std::string> args;
  auto add = [&](const char* option, const std::string& value) { args.insert(args.end(), {option, value}); };
  if (vm.count("dut")) add("--dut", r.duts_text);
  if (vm.count("tolerance-profile")) add("--tolerance-profile", r.profile_text);
  if (!vm["exec-timeout"].defaulted()) add("--exec-timeout", std::to_string(r.exec_timeout));
  if (!vm["dut-timeout"].defaulted()) add("--dut-timeout", std::to_string(r.dut_timeout));
  if (!vm["dut-memory-mb"].defaulted()) add("--dut-memory-mb", std::to_string(r.dut_memory_mb));
  check_golden_cache_options(vm, r.golden_cache);  // the folder itself is each task's to open
  if (vm.count("no-golden-cache")) args.push_back("--no-golden-cache");
  if (vm.count("golden-cache")) add("--golden-cache", fs::absolute(r.golden_cache.dir).lexically_normal().string());
  if (!vm["golden-cache-max-mb"].defaulted()) add("--golden-cache-max-mb", std::to_string(r.golden_cache.max_mb));
  if (vm.count("golden-cache-key"))  // the path, never the key: each task reads it on its node
    add("--golden-cache-key", fs::absolute(r.golden_cache.key_file).lexically_normal().string());
  return args;
}

}  // namespace swa::cli
