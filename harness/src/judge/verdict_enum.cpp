#include "swa/harness/judge/verdict_enum.hpp"

#include "swa/enum_names.hpp"

namespace swa::harness {

SWA_ENUM_NAMES(Verdict, verdict_name, parse_verdict, kAllVerdicts,
               {Verdict::pass, "pass"}, {Verdict::warn, "warn"}, {Verdict::fail, "fail"},
               {Verdict::skip, "skip"}, {Verdict::error, "error"})

}  // namespace swa::harness
