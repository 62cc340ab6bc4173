#pragma once
// bisect: a failing scenario turned into a diagnosis and a minimal reproduction.
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/harness/case/scenario.hpp"
#include "swa/harness/duts/dut_registry.hpp"

namespace swa::harness {

// A suspected bug class: the output a DUT with that bug would produce, or nullopt where the
// hypothesis does not apply to the scenario. Adding a bug class is adding one entry.
struct Variant {
  std::string name;
  std::string meaning;
  std::function<std::optional<std::vector<double>>(const Problem&)> output;
};
const std::vector<Variant>& bisect_variants();

// Runs `dut` through the problem's schedule on a NaN-poisoned output; nullopt (and `error`) when it
// skips or fails.
std::optional<std::vector<double>> run_to_output(dut::Dut& dut, const Problem& pr, std::string* error = nullptr);

struct BisectOptions {
  std::string dut;
  std::string against = "golden";  // or another DUT's name
  int reruns = 3;
  std::filesystem::path out_dir = "bisect-out";
  std::string sweep_file;  // named in the repro command
  bool json = false;       // print DIR/summary.json instead of the report
  DutOptions dut_options;  // how plugin: and exec: DUTs run (--dut-timeout, --in-process)
  // The scenarios the sweep runs before this one, nearest last (at most kRanBefore): a DUT that keeps
  // state from one scenario to the next (a cached plan or mask keyed too coarsely) fails only after them.
  std::vector<Scenario> ran_before;
  static constexpr std::size_t kRanBefore = 8;
};

// Reproduces, localizes, diagnoses, reduces, recovers the attention when no variant explains, and
// writes DIR/report.txt (the finding first), DIR/summary.json, DIR/repro.yaml and DIR/repro.h5; prints
// the report (or the summary, with `json`).
// Returns 0 when the failure does not reproduce, 1 when it does (diagnosed or not).
int bisect(const Scenario& scenario, const BisectOptions& options, std::ostream& out);

}  // namespace swa::harness
