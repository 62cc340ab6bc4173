#include "abi_convert.hpp"

#include <algorithm>
#include <cstddef>

namespace swa::dut::abi {

swa_dut_v2_params to_c(const AttnParams& p) {
  swa_dut_v2_params c{};
  c.struct_size = sizeof c;
  c.q = p.q;
  c.k = p.k;
  c.v = p.v;
  c.out = p.out;
  c.dtype = static_cast<int32_t>(p.dtype);
  c.q_row_stride = p.q_row_stride;
  c.q_head_stride = p.q_head_stride;
  c.k_row_stride = p.k_row_stride;
  c.k_head_stride = p.k_head_stride;
  c.v_row_stride = p.v_row_stride;
  c.v_head_stride = p.v_head_stride;
  c.out_row_stride = p.out_row_stride;
  c.out_head_stride = p.out_head_stride;
  c.batch = p.batch;
  c.seq_lens = p.seq_lens;
  c.seq_offsets = p.seq_offsets;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.head_size = p.head_size;
  c.window_left = p.band.left;
  c.window_right = p.band.right;
  c.scale = p.scale;
  c.mode = static_cast<int32_t>(p.mode);
  c.cache_policy = static_cast<int32_t>(p.cache);
  c.chunk = p.chunk;
  c.decode_steps = p.decode_steps;
  c.mask_format = static_cast<int32_t>(p.mask_format);
  c.mask = p.mask;
  c.mask_rows = p.mask_rows;
  c.mask_block = p.mask_block;
  c.mask_effective_window = p.mask_effective_window;
  c.softcap = p.softcap;
  c.sinks = p.sinks;
  c.kv_format = static_cast<int32_t>(p.kv_format);
  c.k_descale = p.k_descale;
  c.v_descale = p.v_descale;
  c.page_size = p.page_size;
  c.pool_pages = p.pool_pages;
  return c;
}

AttnParams from_c(const swa_dut_v2_params& c) {
  AttnParams p;
  p.q = c.q;
  p.k = c.k;
  p.v = c.v;
  p.out = c.out;
  p.dtype = static_cast<DType>(c.dtype);
  p.q_row_stride = c.q_row_stride;
  p.q_head_stride = c.q_head_stride;
  p.k_row_stride = c.k_row_stride;
  p.k_head_stride = c.k_head_stride;
  p.v_row_stride = c.v_row_stride;
  p.v_head_stride = c.v_head_stride;
  p.out_row_stride = c.out_row_stride;
  p.out_head_stride = c.out_head_stride;
  p.batch = c.batch;
  p.seq_lens = c.seq_lens;
  p.seq_offsets = c.seq_offsets;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_size = c.head_size;
  p.band = {c.window_left, c.window_right};
  p.scale = c.scale;
  p.mode = static_cast<RunMode>(c.mode);
  p.cache = static_cast<CachePolicy>(c.cache_policy);
  p.chunk = c.chunk;
  p.decode_steps = c.decode_steps;
  p.mask_format = static_cast<MaskFormat>(c.mask_format);
  p.mask = c.mask;
  p.mask_rows = c.mask_rows;
  p.mask_block = c.mask_block;
  p.mask_effective_window = c.mask_effective_window;
  if (SWA_DUT_V2_HAS(&c, swa_dut_v2_params, sinks)) {
    p.softcap = c.softcap;
    p.sinks = c.sinks;
  }
  if (SWA_DUT_V2_HAS(&c, swa_dut_v2_params, v_descale)) {
    p.kv_format = static_cast<KvFormat>(c.kv_format);
    p.k_descale = c.k_descale;
    p.v_descale = c.v_descale;
  }
  if (SWA_DUT_V2_HAS(&c, swa_dut_v2_params, pool_pages)) {
    p.page_size = c.page_size;
    p.pool_pages = c.pool_pages;
  }
  return p;
}

CacheView::CacheView(KvCache& cache) {
  for (const auto& g : cache.geometry) base.push_back(g.base);
  tokens_written = cache.tokens_written;
  c.struct_size = sizeof c;
  c.policy = static_cast<int32_t>(cache.policy);
  c.dtype = static_cast<int32_t>(cache.dtype);
  c.slots = cache.slots;
  c.heads_kv = cache.heads_kv;
  c.head_size = cache.head_size;
  c.batch = static_cast<int32_t>(cache.tokens_written.size());
  c.base = base.data();
  c.tokens_written = tokens_written.data();
  c.k = cache.k.data();
  c.v = cache.v.data();
  c.kv_format = static_cast<int32_t>(cache.format);
  page_table = cache.page_table;
  c.page_size = cache.page_size;
  c.pages = cache.pages;
  c.table_width = cache.table_width;
  c.page_table = page_table.empty() ? nullptr : page_table.data();
}

void CacheView::refresh_pages(const KvCache& cache) {
  std::copy(cache.page_table.begin(), cache.page_table.end(), page_table.begin());
}

void CacheView::sync_back(KvCache& cache) const {
  for (std::size_t b = 0; b < base.size(); ++b) cache.geometry[b].base = base[b];
  cache.tokens_written = tokens_written;
  cache.page_table = page_table;  // a plugin must leave it as it is; the cache check sees if it did not
}

KvCache copy_from_c(const swa_dut_v2_cache& c) {
  KvCache k;
  k.policy = static_cast<CachePolicy>(c.policy);
  k.dtype = static_cast<DType>(c.dtype);
  k.slots = c.slots;
  k.heads_kv = c.heads_kv;
  k.head_size = c.head_size;
  if (SWA_DUT_V2_HAS(&c, swa_dut_v2_cache, kv_format)) k.format = static_cast<KvFormat>(c.kv_format);
  for (int b = 0; b < c.batch; ++b) k.geometry.push_back({c.slots, c.base[b]});
  k.tokens_written.assign(c.tokens_written, c.tokens_written + c.batch);
  std::size_t slots = static_cast<std::size_t>(c.batch) * c.slots;
  if (k.paged() && SWA_DUT_V2_HAS(&c, swa_dut_v2_cache, page_table)) {
    k.page_size = c.page_size;
    k.pages = c.pages;
    k.table_width = c.table_width;
    k.page_table.assign(c.page_table, c.page_table + c.batch * c.table_width);
    slots = static_cast<std::size_t>(c.pages) * c.page_size;
  }
  const std::size_t bytes = slots * c.heads_kv * c.head_size * k.element_bytes();
  k.k.assign(static_cast<const unsigned char*>(c.k), static_cast<const unsigned char*>(c.k) + bytes);
  k.v.assign(static_cast<const unsigned char*>(c.v), static_cast<const unsigned char*>(c.v) + bytes);
  return k;
}

void copy_back_to_c(const KvCache& k, swa_dut_v2_cache& c) {
  for (int b = 0; b < c.batch; ++b) {
    c.base[b] = k.geometry[b].base;
    c.tokens_written[b] = k.tokens_written[b];
  }
  if (k.paged()) std::copy(k.page_table.begin(), k.page_table.end(), c.page_table);
  std::copy(k.k.begin(), k.k.end(), static_cast<unsigned char*>(c.k));
  std::copy(k.v.begin(), k.v.end(), static_cast<unsigned char*>(c.v));
}

Traits to_traits(const swa_dut_v2_traits& t) {
  Traits out;
  out.query_tile = t.query_tile;
  out.key_tile = t.key_tile;
  out.head_sizes.assign(t.head_sizes, t.head_sizes + std::clamp(t.head_size_count, 0, 16));
  std::sort(out.head_sizes.begin(), out.head_sizes.end());
  out.times_own_kernels = t.times_own_kernels != 0;
  out.cache = t.cache_private ? CacheReport::none : CacheReport::every_call;
  return out;
}

namespace {
std::string named_bits(uint32_t bits, const char* const* names, int count) {
  std::string out;
  for (int i = 0; i < count; ++i)
    if (bits & (1u << i)) out += (out.empty() ? "" : ", ") + std::string(names[i]);
  return out;
}
}  // namespace

std::string outside_traits(const swa_dut_v2_traits& t, const AttnParams& p) {
  static const char* const dtypes[] = {"fp32", "fp16", "bf16"};
  static const char* const modes[] = {"prefill", "chunked_prefill", "decode"};
  static const char* const policies[] = {"ring_modulo", "ring_compact", "linear", "paged"};
  static const char* const masks[] = {"none", "swa_norm", "swa_compress"};
  auto outside = [](uint32_t bits, int value) { return bits != 0 && !(bits & (1u << value)); };
  const std::string prefix = "the plugin describes itself as running ";
  if (outside(t.dtypes, static_cast<int>(p.dtype))) return prefix + "dtypes " + named_bits(t.dtypes, dtypes, 3) + " only";
  if (outside(t.modes, static_cast<int>(p.mode))) return prefix + "modes " + named_bits(t.modes, modes, 3) + " only";
  if (p.mode != RunMode::prefill && outside(t.cache_policies, static_cast<int>(p.cache)))
    return prefix + "caches " + named_bits(t.cache_policies, policies, 4) + " only";
  if (outside(t.mask_formats, static_cast<int>(p.mask_format)))
    return prefix + "mask formats " + named_bits(t.mask_formats, masks, 3) + " only";
  const Traits traits = to_traits(t);
  if (!traits.head_sizes.empty() &&
      std::find(traits.head_sizes.begin(), traits.head_sizes.end(), p.head_size) == traits.head_sizes.end()) {
    std::string sizes;
    for (int d : traits.head_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(d);
    return prefix + "head sizes " + sizes + " only";
  }
  // A case that uses a field a 2.x header appended is skipped for a plugin whose params_size ends
  // before it (swa/dut_v2.h promises that); v1 plugins count as 2.0.
  // 2.0's sizeof is 208 (LP64); every 2.1 field ends past it, so params_size tells.
  static_assert(offsetof(swa_dut_v2_params, sinks) >= 208 && offsetof(swa_dut_v2_params, softcap) >= 208);
  auto knows = [&](std::size_t end) { return t.params_size >= end; };
  constexpr std::size_t softcap_end = offsetof(swa_dut_v2_params, softcap) + sizeof(float);
  constexpr std::size_t sinks_end = offsetof(swa_dut_v2_params, sinks) + sizeof(const float*);
  const std::string older = "the plugin was built against an ABI without the ";
  const std::string which = " field (params_size " + std::to_string(t.params_size) +
                            ": swa/dut_v1.h or swa/dut_v2.h 2.0; 2.1's is " +
                            std::to_string(offsetof(swa_dut_v2_params, reserved_2_1) + sizeof(std::int32_t)) + ")";
  if (p.softcap != 0.f && !knows(softcap_end)) return older + "softcap" + which + ", and this case soft-caps its scores";
  if (p.sinks && !knows(sinks_end)) return older + "sinks" + which + ", and this case has attention sinks";
  static_assert(offsetof(swa_dut_v2_params, kv_format) >= 224, "2.2 fields start past 2.1's padded size");
  constexpr std::size_t fp8_end = offsetof(swa_dut_v2_params, v_descale) + sizeof(float);
  if (is_fp8(p.kv_format) && !knows(fp8_end))
    return "the plugin was built against an ABI without the kv_format field (params_size " +
           std::to_string(t.params_size) + ": before swa/dut_v2.h 2.2, whose is " +
           std::to_string(offsetof(swa_dut_v2_params, page_size)) + "), and this case has an FP8 KV cache";
  static_assert(offsetof(swa_dut_v2_params, page_size) >= 240, "2.3 fields start past 2.2's size");
  constexpr std::size_t paged_end = offsetof(swa_dut_v2_params, pool_pages) + sizeof(int32_t);
  if (p.mode != RunMode::prefill && p.cache == CachePolicy::paged && !knows(paged_end))
    return "the plugin was built against an ABI without the page_size field (params_size " +
           std::to_string(t.params_size) + ": before swa/dut_v2.h 2.3, whose is " +
           std::to_string(sizeof(swa_dut_v2_params)) + "), and this case has a paged KV cache";
  return {};
}

}  // namespace swa::dut::abi
