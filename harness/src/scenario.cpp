#include "swa/harness/scenario.hpp"


namespace swa::harness {

// id() is built from the case parameter table: case_schema.cpp.

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
