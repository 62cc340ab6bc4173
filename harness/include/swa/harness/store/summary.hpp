#pragma once
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "swa/harness/judge/results.hpp"

namespace swa::harness {

// What the printed commands need to paste into a shell anywhere: the program (command_word) and the
// results file the rows are in (the bisect lines read it; the rerun lines write beside it).
struct SummaryCommands {
  std::string program = "swa-harness";
  std::string results;  // empty: no bisect line, reruns write rerun.h5 in the current folder
};

// The console table: pass/fail/skip/error per DUT x dtype x mode, then the failures (and the
// warnings) grouped by DUT, mode and dtype: per group its count, its first kGroupShown scenarios
// with their reasons and the command that reruns exactly each, and one bisect command for its first.
// Every word of a command is quoted; reruns write --out DIR/rerun.h5 beside the results, never
// over them. The table names a DUT by its label when `labels` has one (the commands keep the --dut name).
inline constexpr int kGroupShown = 3;
void print_summary(std::ostream& out, const std::vector<ResultRow>& rows, const std::string& sweep_file,
                   const std::map<std::string, std::string>& labels = {}, const SummaryCommands& commands = {});

}  // namespace swa::harness
