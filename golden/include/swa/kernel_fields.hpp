#pragma once
// The AttnParams fields that cross into a kernel, listed once. The C ABI's conversions (to_c, from_c
// and v1's to_v1 in dut/external), the params_size skip for plugins built against an older header,
// the exec protocol's request attributes, their reader (kernel_params) and the protocol version all
// walk this list; swa/dut_v2.h keeps its hand-written struct, and dut/external/abi_convert.cpp checks
// each listed field's place in it.
//
// X(FIELD, MEMBER, MINOR, EXEC)
//   FIELD   the field of swa_dut_v2_params (and of swa_dut_v1_params when MINOR is 0)
//   MEMBER  the AttnParams member it carries (a path: band.left)
//   MINOR   the swa/dut_v2.h minor version that appended it (0: there from 2.0 and v1). A case that
//           uses a field of a minor version (kernel_field_used_first) is skipped for a plugin whose
//           params_size ends before that version's fields, and its exec request is protocol 2 + the
//           highest such MINOR.
//   EXEC    the exec request's attribute name; "" for what the request carries otherwise (tensors as
//           datasets, strides implied by their contiguous layout, batch by /seq_lens)
//
// A case "uses" an appended field when it sets it away from its AttnParams default, so an appended
// field's default must mean "off" (softcap 0, sinks nullptr, kv_format dtype, page_size 0).
//
// A new kernel-visible parameter: its AttnParams member (params.hpp), a line here, its field at the end
// of swa_dut_v2_params (swa/dut_v2.h, a new minor version), a case-table entry naming &AttnParams::x
// (harness/src/case/case_schema.cpp: its sweep key), and its semantics (golden, kernels).
#define SWA_KERNEL_FIELDS(X) SWA_KERNEL_FIELDS_2_0(X) SWA_KERNEL_FIELDS_APPENDED(X)

// 2.0's, which are also v1's.
#define SWA_KERNEL_FIELDS_2_0(X) \
  X(q, q, 0, "") X(k, k, 0, "") X(v, v, 0, "") X(out, out, 0, "") X(dtype, dtype, 0, "dtype")          \
  X(q_row_stride, q_row_stride, 0, "") X(q_head_stride, q_head_stride, 0, "")                          \
  X(k_row_stride, k_row_stride, 0, "") X(k_head_stride, k_head_stride, 0, "")                          \
  X(v_row_stride, v_row_stride, 0, "") X(v_head_stride, v_head_stride, 0, "")                          \
  X(out_row_stride, out_row_stride, 0, "") X(out_head_stride, out_head_stride, 0, "")                  \
  X(batch, batch, 0, "") X(seq_lens, seq_lens, 0, "") X(seq_offsets, seq_offsets, 0, "")               \
  X(heads_q, heads_q, 0, "heads") X(heads_kv, heads_kv, 0, "kv_heads")                                 \
  X(head_size, head_size, 0, "head_size") X(window_left, band.left, 0, "window_left")                  \
  X(window_right, band.right, 0, "window_right") X(scale, scale, 0, "scale") X(mode, mode, 0, "mode")  \
  X(cache_policy, cache, 0, "cache") X(chunk, chunk, 0, "chunk")                                       \
  X(decode_steps, decode_steps, 0, "decode_steps") X(mask_format, mask_format, 0, "mask_format")       \
  X(mask, mask, 0, "") X(mask_rows, mask_rows, 0, "") X(mask_block, mask_block, 0, "mask_block")       \
  X(mask_effective_window, mask_effective_window, 0, "mask_effective_window")

// Appended by 2.x headers, in order: 2.1 score semantics, 2.2 FP8 KV, 2.3 paged KV.
#define SWA_KERNEL_FIELDS_APPENDED(X) \
  X(sinks, sinks, 1, "") X(softcap, softcap, 1, "softcap") X(kv_format, kv_format, 2, "kv_format")  \
  X(k_descale, k_descale, 2, "k_descale") X(v_descale, v_descale, 2, "v_descale")                   \
  X(page_size, page_size, 3, "page_size") X(pool_pages, pool_pages, 3, "pool_pages")

// The fields above that point at arrays, with their sizes: what a kernel in another process needs
// copied to it and, where it writes them, back. The plugin worker's shared memory layout, the
// pointers a request carries and the worker's rebasing of them all walk this list; every pointer
// field of SWA_KERNEL_FIELDS must be in it (abi_convert.cpp checks).
//
// Y(FIELD, BYTES, WRITTEN)
//   FIELD    the pointer field (the same name in swa_dut_v2_params and AttnParams)
//   BYTES    its size in bytes, an expression over the AttnParams `p` (0 or a null pointer: nothing)
//   WRITTEN  the kernel writes it: copied back after each call
//
// A new per-head tensor (FlashAttention's alibi_slopes): its AttnParams member, a line in
// SWA_KERNEL_FIELDS, a line here, its swa_dut_v2_params field, its case-table entry and its values
// (inputs), besides its semantics.
#define SWA_KERNEL_ARRAYS(Y)                                                                                 \
  Y(q, swa::strided_tensor_bytes(p, p.q_row_stride, p.q_head_stride, p.heads_q), false)                       \
  Y(k, swa::strided_tensor_bytes(p, p.k_row_stride, p.k_head_stride, p.heads_kv), false)                      \
  Y(v, swa::strided_tensor_bytes(p, p.v_row_stride, p.v_head_stride, p.heads_kv), false)                      \
  Y(out, swa::strided_tensor_bytes(p, p.out_row_stride, p.out_head_stride, p.heads_q), true)                  \
  Y(seq_lens, sizeof(std::int32_t) * p.batch, false)                                                         \
  Y(seq_offsets, sizeof(std::int64_t) * (p.batch + 1), false)                                                \
  Y(mask, sizeof(float) * p.mask_rows * p.mask_rows, false)                                                  \
  Y(sinks, sizeof(float) * p.heads_q, false)

#include "swa/params.hpp"

namespace swa {

// Bytes from a [tokens, heads, head_size] tensor's first element to past its last, with these strides
// (in elements of p.dtype).
inline std::size_t strided_tensor_bytes(const AttnParams& p, std::int64_t row_stride, std::int64_t head_stride,
                                        int heads) {
  const std::int64_t n = p.seq_offsets[p.batch];
  if (n == 0 || heads == 0) return 0;
  return static_cast<std::size_t>((n - 1) * row_stride + (heads - 1) * head_stride + p.head_size) * dtype_bytes(p.dtype);
}

// The highest MINOR in SWA_KERNEL_FIELDS.
constexpr int kernel_fields_latest_minor() {
  int latest = 0;
#define SWA_LATEST_MINOR(field, member, minor, exec) latest = (minor) > latest ? (minor) : latest;
  SWA_KERNEL_FIELDS(SWA_LATEST_MINOR)
#undef SWA_LATEST_MINOR
  return latest;
}
inline constexpr int kKernelFieldsLatestMinor = kernel_fields_latest_minor();

// The highest minor version one of whose fields this case sets away from its AttnParams default (0
// when it uses 2.0's fields alone): a soft-cap or sinks 1, an FP8 KV cache 2, a paged cache 3.
int kernel_fields_minor_used(const AttnParams& p);
// The first field of minor version `minor` the case sets away from its default ("softcap"), for
// messages; "" when it sets none, and for minor 0.
const char* kernel_field_used_first(const AttnParams& p, int minor);

}  // namespace swa
