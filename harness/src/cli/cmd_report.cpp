// swa-harness report: a thin wrapper over reports/swa_report.py (Python, h5py and matplotlib).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "commands.hpp"
#include "options.hpp"

#ifndef SWA_REPORT_SCRIPT
#define SWA_REPORT_SCRIPT "reports/swa_report.py"
#endif

namespace swa::cli {

int cmd_report(const std::vector<std::string>& args) {
  const char* override_script = std::getenv("SWA_REPORT_SCRIPT");
  const std::string script = override_script ? override_script : SWA_REPORT_SCRIPT;
  if (!std::filesystem::exists(script))
    throw UsageError("the report generator " + script + " is missing (set SWA_REPORT_SCRIPT to its path)");
  const std::string python = "/usr/bin/python3";  // Debian's, which sees python3-h5py and python3-matplotlib
  std::vector<std::string> argv_text = {python, script};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(python.c_str(), argv.data());
  throw UsageError("cannot run " + python + " " + script + " (install python3-h5py and python3-matplotlib)");
}

}  // namespace swa::cli
