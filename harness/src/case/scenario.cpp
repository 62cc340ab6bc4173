#include "swa/harness/case/scenario.hpp"

#include <algorithm>

#include "swa/enum_names.hpp"
#include "swa/harness/base/join.hpp"
#include "swa/harness/case/case_schema.hpp"

namespace swa::harness {

std::string_view sinks_name(Sinks s) { return s == Sinks::learned ? "learned" : "none"; }

ProblemSpec Scenario::problem_spec() const {
  ProblemSpec p;
  p.kernel = kernel;
  for (auto len : prompt_lens) p.seq_lens.push_back(len + (mode == RunMode::decode ? decode_steps : 0));
  p.heads_q = heads;
  p.heads_kv = kv_heads;
  p.head_size = head_size;
  p.band = window > 0 ? band_from_window(window, WindowConvention::keys_including_self) : causal_band();
  p.band.right = window_right;
  p.softcap = softcap;
  p.sinks = sinks == Sinks::learned;
  p.dtype = dtype;
  p.kv_format = kv_dtype;
  p.mode = mode;
  p.cache = cache;
  p.page_size = page_size;
  p.chunk = chunk;
  p.decode_steps = decode_steps;
  p.seed = seed;
  p.inputs = inputs;
  p.mask = mask;
  p.mask_generator = mask_generator;
  return p;
}

std::optional<ScenarioFault> scenario_fault(const Scenario& s, Api api) {
  if (s.kv_heads > s.heads || s.heads % s.kv_heads != 0)
    return ScenarioFault{"kv_heads", "heads (" + std::to_string(s.heads) + ") must be a multiple of kv_heads (" +
                                         std::to_string(s.kv_heads) + ")"};
  if (s.mode == RunMode::chunked_prefill && s.chunk < 1) return ScenarioFault{"chunk", "chunked_prefill needs chunk >= 1"};
  if (s.mode == RunMode::decode && s.decode_steps < 1)
    return ScenarioFault{"decode_steps", "decode needs decode_steps >= 1"};
  if (s.mode != RunMode::prefill && (s.cache == CachePolicy::ring_modulo || s.cache == CachePolicy::ring_compact) &&
      s.window == 0)
    return ScenarioFault{"cache", std::string(cache_name(s.cache)) + " needs a window > 0 (a ring holds W slots)"};
  if (api == Api::atb) {
    // ATB SelfAttention has no sinks, no soft-cap and no two-sided window.
    if (s.sinks != Sinks::none) return ScenarioFault{"sinks", "api: atb has no attention sinks: use sinks none"};
    if (s.softcap != 0.f) return ScenarioFault{"softcap", "api: atb has no logit soft-capping: use softcap 0"};
    if (s.window_right != 0)
      return ScenarioFault{"window_right", "api: atb has no two-sided window: use window_right 0"};
    if (s.kv_dtype != KvFormat::dtype)
      return ScenarioFault{"kv_dtype", "api: atb has no FP8 KV cache: use kv_dtype dtype"};
    if (s.mode != RunMode::prefill && s.cache == CachePolicy::paged)
      return ScenarioFault{"cache", "api: atb has no paged KV cache: use ring-modulo, ring-compact or linear"};
  }
  if (s.window_right > 0 && s.mode != RunMode::prefill)
    return ScenarioFault{"window_right", "a two-sided window (window_right > 0) is defined for prefill only: in " +
                                             std::string(mode_name(s.mode)) +
                                             " the keys right of a query are not in the cache yet"};
  if (s.window_right > 0 && s.mask != MaskFormat::none)
    return ScenarioFault{"window_right", "ATB masks are causal: window_right needs mask none"};
  const bool swa = s.window > 0;
  if (api == Api::atb) {
    // ATB: SWA needs windowSize > 0 and an SWA mask type together; either alone is an error.
    if (swa && s.mask == MaskFormat::none)
      return ScenarioFault{"mask", "ATB SWA needs an SWA mask type (swa-norm|swa-compress) with windowSize > 0"};
    if (!swa && s.mask != MaskFormat::none)
      return ScenarioFault{"window", "ATB mask type " + std::string(mask_format_name(s.mask)) + " needs windowSize > 0"};
    // ATB DECODER: maskType cannot be SWA_COMPRESS, and no mask tensor is passed.
    if (s.mode == RunMode::decode && s.mask == MaskFormat::swa_compress)
      return ScenarioFault{"mask", "ATB decode (calcType DECODER) cannot use MASK_TYPE_SLIDING_WINDOW_COMPRESS"};
  } else {
    if (!swa && s.mask != MaskFormat::none) return ScenarioFault{"mask", "an SWA mask needs window > 0"};
    if (s.mode == RunMode::decode && s.mask != MaskFormat::none)
      return ScenarioFault{"mask", "decode takes no mask tensor: use mask none"};
  }
  return std::nullopt;
}

std::int64_t Scenario::tokens() const {
  std::int64_t n = 0;
  for (auto len : prompt_lens) n += len + (mode == RunMode::decode ? decode_steps : 0);
  return n;
}

// The ID walks the case table (case_schema.hpp): a parameter it names is "<id_key>=<value>".
std::string Scenario::id() const {
  std::vector<std::string> parts;
  for (const CaseParam& p : case_params()) {
    if (!p.named(*this)) continue;
    std::string value = p.get(*this);
    if (p.list) std::replace(value.begin(), value.end(), ',', '-');
    parts.push_back(p.id_key.empty() ? value : std::string(p.id_key) + "=" + value);
  }
  return join(parts, "/");
}

}  // namespace swa::harness
