#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "swa/harness/judge/results.hpp"

namespace swa::harness {

// The console table: pass/fail/skip/error per DUT x dtype x mode, then each failure with the
// command that reruns exactly it.
void print_summary(std::ostream& out, const std::vector<ResultRow>& rows, const std::string& sweep_file);

}  // namespace swa::harness
