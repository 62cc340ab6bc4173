#include "isa_setting.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <iterator>

namespace swa::dut::cpu {

bool isa_setting_is(std::string_view value) {
  const char* isa = std::getenv("SWA_CPU_ISA");
  return isa && std::string_view(isa) == value;
}

bool cpu_has_f16c() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
#else
  return false;
#endif
}

std::optional<std::string> isa_setting_error() {
  const char* isa = std::getenv("SWA_CPU_ISA");
  if (!isa || !*isa || std::find(std::begin(kIsaSettings), std::end(kIsaSettings), isa) != std::end(kIsaSettings))
    return std::nullopt;
  std::string allowed;
  for (std::string_view v : kIsaSettings) allowed += (allowed.empty() ? "" : ", ") + std::string(v);
  return "environment variable SWA_CPU_ISA='" + std::string(isa) + "' is not one of " + allowed +
         " (unset: the best paths this CPU has)";
}

}  // namespace swa::dut::cpu
