#pragma once
// /meta of a run's results file: the tool, the build, the machine, the sweep and the command.
#include <string>

#include "swa/harness/store/results_file.hpp"

namespace swa::harness {

Meta collect_meta(const std::string& sweep_file, const std::string& sweep_text, const std::string& command);

}  // namespace swa::harness
