#pragma once
// Deliberately broken kernels that prove the harness catches real bug classes. They share one
// plain fp32 kernel, independent of the optimised DUTs; `none` is that kernel without a fault, the
// control that must pass everything.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "swa/dut/dut.hpp"

namespace swa::dut {

enum class Fault {
  none,
  window_plus_one,         // W + 1 keys
  window_minus_one,        // W - 1 keys
  ring_slot_off_by_one,    // writes position p into slot(p) + 1
  stale_slot_after_wrap,   // a write that wraps the ring leaves the old K/V in the slot
  gqa_modulo_mapping,      // kv head = h % Hkv instead of h / (Hq / Hkv)
  fp16_pv_accumulation,    // P.V accumulated in fp16
  fp16_pv_decode_only,     // P.V accumulated in fp16 in decode steps only (llama.cpp's per-row path)
  no_max_subtraction,      // softmax without subtracting the row max
  cache_slot_shifted,      // ring writes go to slot(p) + 1 and reads follow them: right outputs, wrong cache
  p_low_precision,         // P rounded to 3 fewer mantissa bits than the dtype (fp32 20, fp16 7, bf16 4)
  scores_low_precision,    // the scaled scores rounded to 3 fewer mantissa bits than the dtype
  additive_mask,           // adds the ATB mask to the scores instead of hiding every nonzero (bf16's fill is +1)
  mask_block_cpp_rule,     // reads SWA_COMPRESS with the C++ sample's block (16384/D/16*16 for D > 128)
  none_reversed,           // a correct control: keys summed in reverse order (another accumulation order)
  sink_in_numerator,       // the sink's weight exp(sink - m) also lands in the numerator (as a key with value 1)
  softcap_after_mask,      // caps after masking: a hidden key's -inf becomes -cap, a small but nonzero weight
  window_right_off_by_one, // a two-sided window sees R+1 keys after the query
  fp8_no_saturation,       // FP8 KV quantised without saturation: beyond the largest value e4m3 gives NaN, e5m2 inf
  fp8_descale_twice,       // FP8 KV read back as code * descale * descale
  page_table_off_by_one,   // paged: reads position p through logical page (p + 1) / page_size
  page_freed_early,        // paged: frees a page one query early (the window's oldest key's page, in decode)
  recycled_page_read,      // paged decode: reads the new position's slot before writing it (a recycled page's old K/V)
  // Feature pairs (scenarios/ci.yaml's feature_pairs sweep names the values that make each visible):
  sink_through_softcap,     // sinks x cap: the sink logit is soft-capped too
  softcap_right_after_mask, // cap x two-sided: keys hidden right of the query are capped to -cap, not -inf
  sink_ignored_two_sided,   // sinks x two-sided: a two-sided window's path forgets the sink
  sink_scaled_by_k_descale, // sinks x paged FP8: the sink is scaled with the scores by k_descale
  softcap_before_k_descale, // cap x paged FP8: the cap bends scores of the FP8 codes, k_descale applied after
  // Parameters a kernel could confuse (ci.yaml draws them apart):
  v_read_with_k_descale,    // FP8 V decoded with k_descale
  gqa_group_from_kv_heads,  // kv head = h / Hkv (clamped) instead of h / (Hq / Hkv)
  length_table_of_4,        // prefill keeps 4 sequence lengths: sequence b >= 4 gets min(len[b % 4], len[b]) rows
  first_length_for_all,     // prefill reads sequence 0's length for every sequence: min(len[0], len[b]) rows
  window_from_chunk,        // chunk calls take the window from the chunk size: W = chunk
  window_from_page_size,    // paged calls take the window from the page size: W = page_size
};

inline constexpr Fault kAllFaults[] = {Fault::none,
                                       Fault::window_plus_one,
                                       Fault::window_minus_one,
                                       Fault::ring_slot_off_by_one,
                                       Fault::stale_slot_after_wrap,
                                       Fault::gqa_modulo_mapping,
                                       Fault::fp16_pv_accumulation,
                                       Fault::fp16_pv_decode_only,
                                       Fault::no_max_subtraction,
                                       Fault::cache_slot_shifted,
                                       Fault::p_low_precision,
                                       Fault::scores_low_precision,
                                       Fault::additive_mask,
                                       Fault::mask_block_cpp_rule,
                                       Fault::none_reversed,
                                       Fault::sink_in_numerator,
                                       Fault::softcap_after_mask,
                                       Fault::window_right_off_by_one,
                                       Fault::fp8_no_saturation,
                                       Fault::fp8_descale_twice,
                                       Fault::page_table_off_by_one,
                                       Fault::page_freed_early,
                                       Fault::recycled_page_read,
                                       Fault::sink_through_softcap,
                                       Fault::softcap_right_after_mask,
                                       Fault::sink_ignored_two_sided,
                                       Fault::sink_scaled_by_k_descale,
                                       Fault::softcap_before_k_descale,
                                       Fault::v_read_with_k_descale,
                                       Fault::gqa_group_from_kv_heads,
                                       Fault::length_table_of_4,
                                       Fault::first_length_for_all,
                                       Fault::window_from_chunk,
                                       Fault::window_from_page_size};

// The controls: correct kernels that must pass everything.
inline bool is_control(Fault f) { return f == Fault::none || f == Fault::none_reversed; }

std::string_view fault_name(Fault f);
std::optional<Fault> parse_fault(std::string_view name);
std::string fault_choices();

std::unique_ptr<Dut> make_mutant(Fault fault);

}  // namespace swa::dut
