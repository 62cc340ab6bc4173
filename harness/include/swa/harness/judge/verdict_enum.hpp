#pragma once
// The verdict of one (scenario, DUT), typed (CUTLASS's Disposition). Written to files by name.
#include <cstdint>
#include <optional>
#include <string_view>

namespace swa::harness {

enum class Verdict : std::uint8_t { pass, warn, fail, skip, error };
inline constexpr Verdict kAllVerdicts[] = {Verdict::pass, Verdict::warn, Verdict::fail, Verdict::skip, Verdict::error};
std::string_view verdict_name(Verdict v);  // pass|warn|fail|skip|error
std::optional<Verdict> parse_verdict(std::string_view name);
// fail and error make a run exit 1; warn is reported but does not.
inline bool is_failure(Verdict v) { return v == Verdict::fail || v == Verdict::error; }

}  // namespace swa::harness
