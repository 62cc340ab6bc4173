#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "swa/harness/case/inputs.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/harness/case/tolerance.hpp"
#include "swa/atb_masks.hpp"
#include "swa/params.hpp"

namespace swa::harness {

// Which operator contract a sweep follows: the generic kernel's, or Ascend ATB SelfAttention's
// (SWA needs an SWA mask type, no SWA_COMPRESS in decode).
enum class Api { generic, atb };

// Attention sinks: none, or one learned logit per query head (gpt-oss), drawn from the seed.
enum class Sinks : std::uint8_t { none, learned };
inline constexpr Sinks kAllSinks[] = {Sinks::none, Sinks::learned};
std::string_view sinks_name(Sinks s);  // none | learned

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
  std::int64_t window = 16;  // W keys including self; 0 = no window (unbounded on the left)
  std::int64_t window_right = 0;  // R future keys also seen (two-sided window); prefill only
  float softcap = 0.f;            // C: scaled scores become C tanh(s / C); 0 = off
  Sinks sinks = Sinks::none;
  int chunk = 0;
  int decode_steps = 0;
  CachePolicy cache = CachePolicy::ring_modulo;
  int page_size = 16;  // positions per page of a paged cache (golden/README.md, "Paged KV cache")
  MaskFormat mask = MaskFormat::none;
  AtbSample mask_generator = AtbSample::python;  // which doc sample builds the mask and its block rule
  DType dtype = DType::fp32;
  KvFormat kv_dtype = KvFormat::dtype;  // how the KV cache stores K/V (golden/README.md, "FP8 KV cache")
  InputDistribution inputs = InputDistribution::normal;
  std::uint64_t seed = 0;
  // Kernel parameters that pass from the case to the kernel unchanged: a case-table entry names the
  // AttnParams member (case_schema.cpp), and problem_spec() and build_problem() carry it through.
  // Only such members are read from here; the others of this struct are the problem's own.
  AttnParams kernel;

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

// A rule a case breaks beyond each parameter's own range, and the parameter to blame.
struct ScenarioFault {
  std::string_view key;  // a case parameter's sweep-file key
  std::string message;
};
// kv_heads divides heads, a mode's own parameters are set, a ring cache has a window, and the API's
// mask rules hold. Expects a normalised scenario (case_schema.hpp).
std::optional<ScenarioFault> scenario_fault(const Scenario& s, Api api);

}  // namespace swa::harness
