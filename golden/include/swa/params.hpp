#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "swa/dtype.hpp"
#include "swa/kv_format.hpp"
#include "swa/window.hpp"

namespace swa {

enum class RunMode : std::uint8_t { prefill, chunked_prefill, decode };
enum class CachePolicy : std::uint8_t { ring_modulo, ring_compact, linear, paged };
// How a DUT is handed the window: computed from the band, or read from an ATB mask tensor.
enum class MaskFormat : std::uint8_t { none, swa_norm, swa_compress };

inline constexpr RunMode kAllRunModes[] = {RunMode::prefill, RunMode::chunked_prefill, RunMode::decode};
inline constexpr CachePolicy kAllCachePolicies[] = {CachePolicy::ring_modulo, CachePolicy::ring_compact,
                                                    CachePolicy::linear, CachePolicy::paged};
inline constexpr MaskFormat kAllMaskFormats[] = {MaskFormat::none, MaskFormat::swa_norm, MaskFormat::swa_compress};

std::string_view mode_name(RunMode mode);          // prefill | chunked_prefill | decode
std::optional<RunMode> parse_mode(std::string_view name);
std::string_view cache_name(CachePolicy cache);     // ring-modulo | ring-compact | linear | paged
std::optional<CachePolicy> parse_cache(std::string_view name);
std::string_view mask_format_name(MaskFormat m);    // none | swa-norm | swa-compress
std::optional<MaskFormat> parse_mask_format(std::string_view name);

// Everything one attention call needs, shared by the golden, the CPU DUT and the CUDA DUT, in the
// manner of FlashAttention's Flash_fwd_params: raw pointers, explicit strides, sizes and flags.
//
// Layout: ATB's packed variable-length batch. Q and the output are [nTokens, heads_q, head_size],
// K and V are [nTokens, heads_kv, head_size], sequence b occupying rows
// [seq_offsets[b], seq_offsets[b] + seq_lens[b]). Strides are in elements; the last dimension is
// contiguous. A sequence's token t has absolute position t.
//
// Schedule: `mode` says how the tokens reach the kernel. prefill: all at once, no cache.
// chunked_prefill: the prompt in chunks of `chunk` tokens through a KV cache. decode: the first
// seq_lens[b] - decode_steps tokens as a prompt (in chunks of `chunk`, or whole when chunk == 0),
// then decode_steps single-token steps, all through the cache.
struct AttnParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;  // DUT output in `dtype`; the golden writes fp64 to its own buffer instead
  DType dtype = DType::fp32;

  std::int64_t q_row_stride = 0, q_head_stride = 0;
  std::int64_t k_row_stride = 0, k_head_stride = 0;
  std::int64_t v_row_stride = 0, v_head_stride = 0;
  std::int64_t out_row_stride = 0, out_head_stride = 0;

  int batch = 0;
  const std::int32_t* seq_lens = nullptr;     // [batch]
  const std::int64_t* seq_offsets = nullptr;  // [batch + 1]
  int heads_q = 0;
  int heads_kv = 0;
  int head_size = 0;

  WindowBand band = causal_band();
  float scale = 0.f;  // softmax scale, usually 1/sqrt(head_size)

  // Score semantics of modern SWA layers (golden/README.md, "Sinks and soft-capping").
  // softcap > 0: a scaled score s becomes softcap * tanh(s / softcap), before the window and the
  // softmax (Gemma 2; FlashAttention's softcap, which also applies the scale first). 0 = off.
  float softcap = 0.f;
  // Attention sinks (gpt-oss): one logit per query head, [heads_q] floats holding values of `dtype`.
  // It joins every row's softmax denominator and adds nothing to the output. nullptr = none.
  const float* sinks = nullptr;

  // FP8 KV (golden/README.md, "FP8 KV cache"). kv_format != dtype: every K and V value attention
  // reads, in every mode, is fp8(k / k_descale) * k_descale (v likewise), the FP8 rounding to nearest
  // even and saturating; q, k, v and out stay in `dtype`. A kernel quantises K/V when it writes them
  // (the KV cache holds the FP8 codes) and multiplies by the descale when it reads them. The harness
  // draws the descales as powers of two, which makes k / k_descale exact in any precision.
  KvFormat kv_format = KvFormat::dtype;
  float k_descale = 1.f, v_descale = 1.f;

  RunMode mode = RunMode::prefill;
  CachePolicy cache = CachePolicy::ring_modulo;
  int chunk = 0;
  int decode_steps = 0;

  // Paged KV cache (cache == paged; golden/README.md, "Paged KV cache", rules in paging.hpp): a pool
  // of pool_pages pages of page_size positions shared by the batch, a page table per sequence.
  // page_order[0..pool_pages) is the pool's initial order: pages are taken page_order[0] first,
  // except that a freed page is taken before any never-used one, the most recently freed first.
  int page_size = 0;
  int pool_pages = 0;
  const std::int32_t* page_order = nullptr;

  // ATB mask tensor, for DUTs that read the window from it (values as the doc's generator writes
  // them; 0 = visible). swa_norm: [mask_rows, mask_rows] over absolute positions. swa_compress:
  // [512, 512], read tile by tile with block mask_block and effective window mask_effective_window
  // (golden/mask_decoder.hpp). The golden always computes the window from `band`.
  MaskFormat mask_format = MaskFormat::none;
  const float* mask = nullptr;
  std::int64_t mask_rows = 0;
  int mask_block = 0;
  std::int64_t mask_effective_window = 0;
};

float default_scale(int head_size);

// GQA: query head h reads kv head h / (heads_q / heads_kv).
SWA_HOST_DEVICE constexpr int kv_head_for(int q_head, int heads_q, int heads_kv) {
  return q_head / (heads_q / heads_kv);
}

// Contiguous strides for the packed layout.
void set_contiguous_strides(AttnParams& p);

std::int64_t total_tokens(const AttnParams& p);
// Tokens of sequence b that form its prompt (everything but the decode steps).
std::int64_t prompt_len(const AttnParams& p, int b);

// Throws std::invalid_argument naming the offending field and its allowed range.
void validate(const AttnParams& p);

}  // namespace swa
