#pragma once
// How close to the golden an output must be: named profiles of limits, scaled by the same-precision
// baseline's own error (harness/README.md has the measurements behind the numbers).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "swa/dtype.hpp"

namespace swa::harness {

// Named sets of limits (harness/README.md has the measurements behind them).
enum class ToleranceProfile : std::uint8_t {
  strict,        // FlashAttention-like: 2x the baseline's worst element, a one-ulp floor, tight L2
  standard,      // the default ("default" in YAML and on the command line)
  loose,         // llama.cpp-like: NMSE per phase only
};
inline constexpr ToleranceProfile kAllToleranceProfiles[] = {ToleranceProfile::strict, ToleranceProfile::standard,
                                                             ToleranceProfile::loose};
std::string_view profile_name(ToleranceProfile p);  // strict|default|loose
std::optional<ToleranceProfile> parse_profile(std::string_view name);
std::string profile_choices();

// Per phase: fail iff  max|out - golden| > rtol_factor * baseline max + atol_floor
//                   or rel_l2(out) > l2_factor * rel_l2(baseline) + l2_floor
//                   or NMSE > nmse_max (when nmse_max > 0);
//            warn iff  rel_l2(out) > warn_l2_factor * rel_l2(baseline) + l2_floor (when warn_l2_factor > 0).
// A factor of 0 turns its criterion off.
struct Tolerance {
  ToleranceProfile profile = ToleranceProfile::standard;
  double rtol_factor = 0, atol_floor = 0;
  double l2_factor = 0, l2_floor = 0, warn_l2_factor = 0;
  double nmse_max = 0;
};
Tolerance tolerance_for(ToleranceProfile profile, DType dtype);

}  // namespace swa::harness
