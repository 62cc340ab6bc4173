#include "swa/params.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include "swa/enum_names.hpp"
#include "swa/paging.hpp"

namespace swa {

SWA_ENUM_NAMES(RunMode, mode_name, parse_mode, kAllRunModes,
               {RunMode::prefill, "prefill"}, {RunMode::chunked_prefill, "chunked_prefill"},
               {RunMode::decode, "decode"})

SWA_ENUM_NAMES(CachePolicy, cache_name, parse_cache, kAllCachePolicies,
               {CachePolicy::ring_modulo, "ring-modulo"}, {CachePolicy::ring_compact, "ring-compact"},
               {CachePolicy::linear, "linear"}, {CachePolicy::paged, "paged"})

SWA_ENUM_NAMES(MaskFormat, mask_format_name, parse_mask_format, kAllMaskFormats,
               {MaskFormat::none, "none"}, {MaskFormat::swa_norm, "swa-norm"},
               {MaskFormat::swa_compress, "swa-compress"})

float default_scale(int head_size) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_size))); }

void set_contiguous_strides(AttnParams& p) {
  p.q_head_stride = p.out_head_stride = p.head_size;
  p.k_head_stride = p.v_head_stride = p.head_size;
  p.q_row_stride = p.out_row_stride = static_cast<std::int64_t>(p.heads_q) * p.head_size;
  p.k_row_stride = p.v_row_stride = static_cast<std::int64_t>(p.heads_kv) * p.head_size;
}

std::int64_t total_tokens(const AttnParams& p) { return p.batch > 0 ? p.seq_offsets[p.batch] : 0; }

std::int64_t prompt_len(const AttnParams& p, int b) {
  return p.mode == RunMode::decode ? p.seq_lens[b] - p.decode_steps : p.seq_lens[b];
}

namespace {
void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}
}  // namespace

void validate(const AttnParams& p) {
  require(p.q && p.k && p.v, "params: q, k and v must be set");
  require(p.batch >= 1, "params.batch must be >= 1, got " + std::to_string(p.batch));
  require(p.seq_lens && p.seq_offsets, "params: seq_lens and seq_offsets must be set");
  require(p.heads_q >= 1 && p.heads_kv >= 1, "params.heads_q and heads_kv must be >= 1");
  require(p.heads_q % p.heads_kv == 0, "params.heads_q (" + std::to_string(p.heads_q) +
                                           ") must be a multiple of heads_kv (" + std::to_string(p.heads_kv) + ")");
  require(p.head_size >= 1, "params.head_size must be >= 1, got " + std::to_string(p.head_size));
  require(std::isfinite(p.scale) && p.scale > 0.f, "params.scale must be finite and > 0");
  require(p.seq_offsets[0] == 0, "params.seq_offsets[0] must be 0");
  for (int b = 0; b < p.batch; ++b) {
    require(p.seq_lens[b] >= 1, "params.seq_lens[" + std::to_string(b) + "] must be >= 1");
    require(p.seq_offsets[b + 1] == p.seq_offsets[b] + p.seq_lens[b],
            "params.seq_offsets[" + std::to_string(b + 1) + "] must equal seq_offsets[b] + seq_lens[b]");
  }
  require(std::isfinite(p.softcap) && p.softcap >= 0.f,
          "params.softcap must be finite and >= 0 (0 = off), got " + std::to_string(p.softcap));
  if (p.sinks)
    for (int h = 0; h < p.heads_q; ++h)
      require(std::isfinite(p.sinks[h]), "params.sinks[" + std::to_string(h) + "] must be finite");
  if (is_fp8(p.kv_format))
    require(std::isfinite(p.k_descale) && p.k_descale > 0.f && std::isfinite(p.v_descale) && p.v_descale > 0.f,
            "params.k_descale and v_descale must be finite and > 0 with an FP8 KV format");
  if (p.mode == RunMode::prefill) return;
  require(p.band.right == 0, "params.band.right must be 0 (causal) when tokens go through a KV cache");
  const bool ring = p.cache == CachePolicy::ring_modulo || p.cache == CachePolicy::ring_compact;
  require(!ring || p.band.left >= 0, "params.band.left must be bounded (a window) for a ring cache");
  require(p.chunk >= 0, "params.chunk must be >= 0");
  if (p.mode == RunMode::chunked_prefill) require(p.chunk >= 1, "params.chunk must be >= 1 in chunked_prefill");
  if (p.mode == RunMode::decode) {
    require(p.decode_steps >= 1, "params.decode_steps must be >= 1 in decode mode");
    for (int b = 0; b < p.batch; ++b)
      require(p.seq_lens[b] > p.decode_steps, "params.seq_lens[" + std::to_string(b) +
                                                  "] must exceed decode_steps (the prompt needs >= 1 token)");
  }
  if (p.cache == CachePolicy::paged) validate_paging(p);
}

}  // namespace swa
