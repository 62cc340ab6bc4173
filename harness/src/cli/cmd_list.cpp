// swa-harness list: the expanded scenarios of a sweep file, one ID per line.
#include <iostream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/harness/case/sweep_file.hpp"

namespace swa::cli {

int cmd_list(const std::vector<std::string>& args) {
  std::string path, sweep, filter, shard_text;
  std::int64_t max_scenarios = harness::SweepLoadOptions{}.max_scenarios;
  po::options_description desc("swa-harness list SWEEP.yaml: print the expanded scenario IDs");
  desc.add_options()
      ("sweep-file", po::value(&path)->required(), "the sweep file (positional)")
      ("sweep", po::value(&sweep), "only this named sweep")
      ("filter", po::value(&filter), "an exact scenario ID, or a regex searched in the IDs")
      ("shard", po::value(&shard_text), "K/N: every N-th scenario from the K-th (0 <= K < N)")
      ("max-scenarios", po::value(&max_scenarios)->default_value(max_scenarios), "refuse sweep files that expand to more scenarios");
  po::positional_options_description positional;
  positional.add("sweep-file", 1);
  po::variables_map vm;
  if (!parse_options("list", args, desc, vm, &positional)) return kOk;
  require_range("--max-scenarios", max_scenarios, 1, std::int64_t{1} << 40);
  const harness::SweepFile file = load_sweep_or_usage_error(path, {0, max_scenarios});
  const auto scenarios = harness::select_scenarios(
      file, vm.count("sweep") ? std::optional(sweep) : std::nullopt,
      vm.count("filter") ? std::optional(filter) : std::nullopt, parse_shard(shard_text));
  for (const auto& s : scenarios) std::cout << s.id() << "\n";
  std::cerr << scenarios.size() << " scenarios\n";
  return kOk;
}

}  // namespace swa::cli
