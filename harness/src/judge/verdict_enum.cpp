#include "swa/harness/judge/verdict_enum.hpp"

#include "swa/enum_names.hpp"

namespace swa::harness {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::warn: return "warn";
    case Verdict::fail: return "fail";
    case Verdict::skip: return "skip";
    case Verdict::error: return "error";
  }
  return "?";
}
std::optional<Verdict> parse_verdict(std::string_view name) { return parse_enum(name, kAllVerdicts, verdict_name); }

}  // namespace swa::harness
