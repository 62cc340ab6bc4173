#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "swa/harness/judge/results.hpp"

namespace swa::harness {

// JUnit XML: one testcase per (scenario, DUT), classname the DUT, name the scenario ID; failures
// carry the metrics and the threshold. Written to a temporary, then renamed.
void write_junit(const std::filesystem::path& path, const std::string& suite, const std::vector<ResultRow>& rows);

}  // namespace swa::harness
