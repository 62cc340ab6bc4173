#include "swa/harness/scenario.hpp"

#include "swa/enum_names.hpp"
#include "swa/harness/join.hpp"

namespace swa::harness {

std::string Scenario::id() const {
  const std::string seqs = join(prompt_lens, "-");
  std::string s = "mode=" + std::string(mode_name(mode)) + "/seqs=" + seqs + "/hq=" + std::to_string(heads) +
                  "/hkv=" + std::to_string(kv_heads) + "/d=" + std::to_string(head_size) + "/w=" +
                  std::to_string(window);
  if (mode != RunMode::prefill) {
    s += "/chunk=" + std::to_string(chunk);
    if (mode == RunMode::decode) s += "/steps=" + std::to_string(decode_steps);
    s += "/cache=" + std::string(cache_name(cache));
  }
  s += "/mask=" + std::string(mask_format_name(mask));
  if (mask_generator != AtbSample::python) s += "/gen=" + std::string(sample_name(mask_generator));  // IDs before it stay
  s += "/" + std::string(dtype_name(dtype)) + "/in=" +
       std::string(distribution_name(inputs)) + "/seed=" + std::to_string(seed);
  return s;
}

ProblemSpec Scenario::problem_spec() const {
  ProblemSpec p;
  for (auto len : prompt_lens) p.seq_lens.push_back(len + (mode == RunMode::decode ? decode_steps : 0));
  p.heads_q = heads;
  p.heads_kv = kv_heads;
  p.head_size = head_size;
  p.band = window > 0 ? band_from_window(window, WindowConvention::keys_including_self) : causal_band();
  p.dtype = dtype;
  p.mode = mode;
  p.cache = cache;
  p.chunk = chunk;
  p.decode_steps = decode_steps;
  p.seed = seed;
  p.inputs = inputs;
  p.mask = mask;
  p.mask_generator = mask_generator;
  return p;
}

std::int64_t Scenario::tokens() const {
  std::int64_t n = 0;
  for (auto len : prompt_lens) n += len + (mode == RunMode::decode ? decode_steps : 0);
  return n;
}

}  // namespace swa::harness
