// swa-harness list: the expanded scenarios of a sweep file, one ID per line; with --coverage, what
// they exercise (case/coverage.hpp), exit 1 when an allowed cell has none.
#include <iomanip>
#include <iostream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/harness/case/coverage.hpp"
#include "swa/harness/case/sweep_file.hpp"
#include "swa/harness/duts/dut_registry.hpp"

namespace swa::cli {

namespace {

int print_coverage(const std::string& path, const harness::Coverage& c) {
  std::cout << "coverage of " << path << ": " << c.scenarios << " scenarios\n\n"
            << std::left << std::setw(19) << "feature" << std::setw(17) << "mode" << std::setw(6) << "dtype"
            << std::setw(14) << "cache" << "scenarios\n";
  for (const auto& cell : c.cells)
    std::cout << std::setw(19) << cell.feature << std::setw(17) << mode_name(cell.mode) << std::setw(6)
              << dtype_name(cell.dtype) << std::setw(14) << cell.cache << cell.scenarios
              << (cell.scenarios ? "" : "  <- none") << "\n";
  std::cout << "\n" << std::setw(56) << "score-feature pair" << "scenarios\n";
  for (const auto& pair : c.pairs)
    std::cout << std::setw(56) << pair.name << pair.scenarios << (pair.scenarios ? "" : "  <- none") << "\n";
  const auto gaps = c.gaps();
  std::cout << "\n" << c.cells.size() + c.pairs.size() - gaps.size() << " of " << c.cells.size() + c.pairs.size()
            << " allowed cells and pairs have scenarios";
  if (gaps.empty()) {
    std::cout << "\n";
    return kOk;
  }
  std::cout << "; none for:\n";
  for (const auto& g : gaps) std::cout << "  " << g << "\n";
  return kCheckFailed;
}

}  // namespace

int cmd_list(const std::vector<std::string>& args) {
  std::string path, sweep, filter, shard_text;
  std::int64_t max_scenarios = harness::SweepLoadOptions{}.max_scenarios;
  po::options_description desc(
      "swa-harness list SWEEP.yaml: print the expanded scenario IDs\nswa-harness list --duts: the DUTs --dut and "
      "duts: can name");
  desc.add_options()
      ("sweep-file", po::value(&path), "the sweep file (positional)")
      ("duts", "instead: the kinds of DUT --dut and a sweep's duts: can name, as a Markdown table")
      ("sweep", po::value(&sweep), "only this named sweep")
      ("filter", po::value(&filter), "an exact scenario ID, or a regex searched in the IDs")
      ("shard", po::value(&shard_text), "K/N: every N-th scenario from the K-th (0 <= K < N)")
      ("max-scenarios", po::value(&max_scenarios)->default_value(max_scenarios), "refuse sweep files that expand to more scenarios")
      ("coverage", "instead of the IDs: scenarios per (feature, mode, dtype, cache) cell the rules allow and per score-feature pair; exit 1 when one has none");
  po::positional_options_description positional;
  positional.add("sweep-file", 1);
  po::variables_map vm;
  if (!parse_options("list", args, desc, vm, &positional)) return kOk;
  if (vm.count("duts")) {
    if (vm.count("sweep-file")) throw UsageError("option --duts lists the DUT kinds: give it without a sweep file");
    std::cout << harness::dut_kinds_table();
    return kOk;
  }
  if (!vm.count("sweep-file")) throw UsageError("the sweep file is required (swa-harness list SWEEP.yaml)");
  require_range("--max-scenarios", max_scenarios, 1, std::int64_t{1} << 40);
  const harness::SweepFile file = load_sweep_or_usage_error(path, {0, max_scenarios});
  const auto scenarios = harness::select_scenarios(
      file, vm.count("sweep") ? std::optional(sweep) : std::nullopt,
      vm.count("filter") ? std::optional(filter) : std::nullopt, parse_shard(shard_text));
  if (vm.count("coverage")) return print_coverage(path, harness::coverage_of(scenarios));
  for (const auto& s : scenarios) std::cout << s.id() << "\n";
  std::cerr << scenarios.size() << " scenarios\n";
  return kOk;
}

}  // namespace swa::cli
