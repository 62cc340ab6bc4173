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
  no_max_subtraction,      // softmax without subtracting the row max
};

inline constexpr Fault kAllFaults[] = {Fault::none,
                                       Fault::window_plus_one,
                                       Fault::window_minus_one,
                                       Fault::ring_slot_off_by_one,
                                       Fault::stale_slot_after_wrap,
                                       Fault::gqa_modulo_mapping,
                                       Fault::fp16_pv_accumulation,
                                       Fault::no_max_subtraction};

std::string_view fault_name(Fault f);
std::optional<Fault> parse_fault(std::string_view name);
std::string fault_choices();

std::unique_ptr<Dut> make_mutant(Fault fault);

}  // namespace swa::dut
