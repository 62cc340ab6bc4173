#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "swa/harness/case/scenario.hpp"

namespace swa::harness {

// A sweep file's problem; the message starts "FILE:LINE:COL: sweeps.NAME.SECTION.KEY: ...".
struct SweepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Sweep {
  std::string name;
  std::vector<Scenario> scenarios;  // expanded, validated, unique IDs, in file order
};

struct SweepFile {
  std::string path;
  std::string text;  // recorded in the results file
  std::vector<Sweep> sweeps;
};

struct SweepLoadOptions {
  std::int64_t memory_limit_bytes = 0;  // 0: half the machine's memory
  // Counted before anything is expanded: a 570-byte sweep once asked for 10^12 scenarios.
  std::int64_t max_scenarios = 1'000'000;
};
// Sweep files are hand-written or generated lists; a bigger file is refused before it is parsed
// (yaml-cpp needs ~150 bytes of memory per byte of a long list).
constexpr std::uintmax_t kMaxSweepFileBytes = 8u << 20;

// Reads, expands and validates every sweep of the file before anything runs. Throws SweepError.
SweepFile load_sweep_file(const std::string& path, const SweepLoadOptions& options = {});

struct Shard {
  int index = 0;  // 0-based
  int count = 1;
};

// The scenarios of one sweep (or all, deduplicated by ID), kept when `filter` is an exact ID or a
// regex found in the ID, then every count-th from index: deterministic in the expanded order.
std::vector<Scenario> select_scenarios(const SweepFile& file, const std::optional<std::string>& sweep,
                                       const std::optional<std::string>& filter, Shard shard);

}  // namespace swa::harness
