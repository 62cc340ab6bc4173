#include "abi_convert.hpp"

#include <algorithm>

namespace swa::dut::abi {

swa_dut_v1_params to_c(const AttnParams& p) {
  swa_dut_v1_params c{};
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
  return c;
}

AttnParams from_c(const swa_dut_v1_params& c) {
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
  return p;
}

CacheView::CacheView(KvCache& cache) {
  for (const auto& g : cache.geometry) base.push_back(g.base);
  tokens_written = cache.tokens_written;
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
}

void CacheView::sync_back(KvCache& cache) const {
  for (std::size_t b = 0; b < base.size(); ++b) cache.geometry[b].base = base[b];
  cache.tokens_written = tokens_written;
}

KvCache copy_from_c(const swa_dut_v1_cache& c) {
  KvCache k;
  k.policy = static_cast<CachePolicy>(c.policy);
  k.dtype = static_cast<DType>(c.dtype);
  k.slots = c.slots;
  k.heads_kv = c.heads_kv;
  k.head_size = c.head_size;
  for (int b = 0; b < c.batch; ++b) k.geometry.push_back({c.slots, c.base[b]});
  k.tokens_written.assign(c.tokens_written, c.tokens_written + c.batch);
  const std::size_t bytes = static_cast<std::size_t>(c.batch) * c.slots * c.heads_kv * c.head_size * dtype_bytes(k.dtype);
  k.k.assign(static_cast<const unsigned char*>(c.k), static_cast<const unsigned char*>(c.k) + bytes);
  k.v.assign(static_cast<const unsigned char*>(c.v), static_cast<const unsigned char*>(c.v) + bytes);
  return k;
}

void copy_back_to_c(const KvCache& k, swa_dut_v1_cache& c) {
  for (int b = 0; b < c.batch; ++b) {
    c.base[b] = k.geometry[b].base;
    c.tokens_written[b] = k.tokens_written[b];
  }
  std::copy(k.k.begin(), k.k.end(), static_cast<unsigned char*>(c.k));
  std::copy(k.v.begin(), k.v.end(), static_cast<unsigned char*>(c.v));
}

}  // namespace swa::dut::abi
