#pragma once
// /meta of a run's results file: the tool, the build, the machine, the sweep and the command.
#include <string>

#include "swa/harness/store/results_file.hpp"

namespace swa::harness {

// "swa-harness 0.1.0 (commit 1a2b3c4d5e6f, g++ 12.2.0)": what --version prints.
std::string version_line(const std::string& program);

Meta collect_meta(const std::string& sweep_file, const std::string& sweep_text, const std::string& command);

}  // namespace swa::harness
