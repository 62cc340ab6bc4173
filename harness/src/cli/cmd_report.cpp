// swa-harness report: a thin wrapper over reports/swa_report.py (Python, h5py and matplotlib).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "commands.hpp"
#include "swa/harness/base/host.hpp"
#include "options.hpp"
#include "swa/harness/store/results_file.hpp"
#include "swa/platform/install_layout.hpp"

#ifndef SWA_REPORT_SCRIPT
#define SWA_REPORT_SCRIPT "reports/swa_report.py"
#endif

namespace swa::cli {

namespace {

// The results files among report's arguments: its positional inputs and --compare's two.
std::vector<std::string> results_files(const std::vector<std::string>& args) {
  static const std::set<std::string> with_value = {"-o", "--out", "--bisect", "--error-factor", "--time-pct",
                                                     "--pair"};
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (with_value.count(a)) {
      ++i;
    } else if (a == "--compare") {
      for (std::size_t k = 1; k <= 2 && i + k < args.size(); ++k) files.push_back(args[i + k]);
      i += 2;
    } else if (a == "--" || a.empty() || a[0] != '-') {
      files.push_back(a);
    }
  }
  return files;
}

}  // namespace

int cmd_report(const std::vector<std::string>& args) {
  // Each results file is read here first, with merge's checks (a FIFO or a special file refused
  // unopened, a damaged file read in a forked, bounded child, the digests): h5py would hang on a FIFO
  // and can crash on a damaged file.
  for (const std::string& file : results_files(args)) {
    if (file == "--") continue;
    if (!std::filesystem::exists(file)) {
      std::cerr << "swa-harness report: error: " << file << " does not exist\n";
      return kBadInput;
    }
    try {
      harness::read_results(file);
    } catch (const std::exception& e) {
      std::cerr << "swa-harness report: error: " << e.what() << "\n";
      return kBadInput;
    }
  }

  const char* override_script = std::getenv("SWA_REPORT_SCRIPT");
  const std::string script =
      override_script ? std::string(override_script)
                      : platform::installed_or_built(std::string(platform::kInstalledShare) + "/reports/swa_report.py", SWA_REPORT_SCRIPT);
  if (!std::filesystem::exists(script))
    throw UsageError("the report generator " + script + " is missing (set SWA_REPORT_SCRIPT to its path)");
  const std::string python = "/usr/bin/python3";  // Debian's, which sees python3-h5py and python3-matplotlib
  // The rerun lines the report prints name this program as the console's do (host.hpp).
  ::setenv("SWA_HARNESS_COMMAND", harness::command_word("swa-harness").c_str(), 1);
  std::vector<std::string> argv_text = {python, script};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(python.c_str(), argv.data());
  throw UsageError("cannot run " + python + " " + script + " (install python3-h5py and python3-matplotlib)");
}

}  // namespace swa::cli
