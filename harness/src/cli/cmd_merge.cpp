// swa-harness merge: join shard result files into one.
#include <iostream>

#include "commands.hpp"
#include "swa/harness/store/results_store.hpp"
#include "options.hpp"
#include "swa/harness/store/results_file.hpp"

namespace swa::cli {

int cmd_merge(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string out;
  po::options_description desc("swa-harness merge A.h5 B.h5 ... -o ALL.h5: join shard result files");
  desc.add_options()
      ("inputs", po::value(&inputs)->multitoken()->required(), "result files (positional)")
      ("out,o", po::value(&out)->required(), "merged results file")
      ("force", "replace --out even when the file there is not a results file");
  po::positional_options_description positional;
  positional.add("inputs", -1);
  po::variables_map vm;
  if (!parse_options("merge", args, desc, vm, &positional)) return kOk;
  std::vector<std::filesystem::path> paths;
  std::vector<std::pair<std::string, std::string>> named;
  for (const auto& in : inputs) {
    if (!std::filesystem::exists(in)) throw UsageError("merge input " + in + " does not exist");
    paths.emplace_back(in);
    named.emplace_back("an input", in);
  }
  guard_output("--out", out, OutputKind::results, vm.count("force") > 0, named);
  const harness::ResultsFileLock lock(out, "swa-harness merge");  // a run writing --out meanwhile: exit 2
  std::vector<std::string> warnings;
  const harness::ResultsContents merged = harness::merge_results(paths, warnings);
  harness::write_results(out, merged);
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
  std::cout << "merged " << inputs.size() << " files into " << out << ": " << merged.scenarios.size()
            << " scenarios, " << merged.results.size() << " results\n";
  return kOk;
}

}  // namespace swa::cli
