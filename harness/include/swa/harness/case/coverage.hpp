#pragma once
// What a sweep file exercises (swa-harness list --coverage): for each cell (feature, mode, dtype,
// cache policy) the rules allow, and for each pair of score features whose order a kernel can mix
// up, how many scenarios exercise it. A cell is allowed when a scenario with it passes
// scenario_fault under either API: the same rules that refuse a sweep file's case, written from
// dut_v2.h's contract (two-sided windows in prefill only, no paged cache or score features under
// ATB, masks in decode only as ATB's DECODER does).
#include <cstdint>
#include <string>
#include <vector>

#include "swa/harness/case/scenario.hpp"

namespace swa::harness {

struct CoverageCell {
  std::string feature;  // plain | sinks | softcap | two-sided | fp8-e4m3 | fp8-e5m2 | mask-swa-norm | mask-swa-compress
  RunMode mode = RunMode::prefill;
  DType dtype = DType::fp32;
  std::string cache;  // a cache policy's name; "-" in prefill, which has no cache
  std::int64_t scenarios = 0;
};

struct CoveragePair {
  std::string name;  // "sinks x softcap", "softcap x fp8 x paged", ...
  std::int64_t scenarios = 0;
};

struct Coverage {
  std::vector<CoverageCell> cells;  // every allowed cell, in table order, with its count (0 = a gap)
  std::vector<CoveragePair> pairs;
  std::int64_t scenarios = 0;
  std::vector<std::string> gaps() const;  // "feature mode dtype cache" of each cell or pair with none
};

Coverage coverage_of(const std::vector<Scenario>& scenarios);

}  // namespace swa::harness
