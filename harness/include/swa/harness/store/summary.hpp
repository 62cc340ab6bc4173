#pragma once
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "swa/harness/judge/results.hpp"

namespace swa::harness {

// The console table: pass/fail/skip/error per DUT x dtype x mode, then each failure with the
// command that reruns exactly it. The table names a DUT by its label when `labels` has one (the
// rerun commands keep the --dut name).
void print_summary(std::ostream& out, const std::vector<ResultRow>& rows, const std::string& sweep_file,
                   const std::map<std::string, std::string>& labels = {});

}  // namespace swa::harness
