#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "swa/harness/inputs.hpp"
#include "swa/harness/problem.hpp"
#include "swa/harness/tolerance.hpp"
#include "swa/atb_masks.hpp"
#include "swa/params.hpp"

namespace swa::harness {


struct PerfSettings {
  int warmups = 1;
  int repeats = 5;
};

// One case, as a value. Its ID is a pure function of the parameters that change the numbers, readable
// like llama.cpp's test-backend-ops names, free of regex metacharacters so `--filter ID` reruns it.
struct Scenario {
  RunMode mode = RunMode::prefill;
  std::vector<std::int32_t> prompt_lens;  // per sequence; decode adds decode_steps tokens to each
  int heads = 4;
  int kv_heads = 4;
  int head_size = 64;
  std::int64_t window = 16;  // W keys including self; 0 = no window (causal)
  int chunk = 0;
  int decode_steps = 0;
  CachePolicy cache = CachePolicy::ring_modulo;
  MaskFormat mask = MaskFormat::none;
  AtbSample mask_generator = AtbSample::python;  // which doc sample builds the mask and its block rule
  DType dtype = DType::fp32;
  InputDistribution inputs = InputDistribution::normal;
  std::uint64_t seed = 0;

  // Not part of the ID: how it is judged and by whom.
  std::string sweep;
  Tolerance tolerance;
  std::vector<std::string> duts;
  std::optional<PerfSettings> perf;  // time the DUTs too
  bool cache_check = true;            // compare the KV cache a DUT leaves with the golden cache model

  std::string id() const;
  ProblemSpec problem_spec() const;
  std::int64_t tokens() const;
};

}  // namespace swa::harness
