#include "isa_setting.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>

namespace swa::dut::cpu {

bool isa_setting_is(std::string_view value) {
  const char* isa = std::getenv("SWA_CPU_ISA");
  return isa && std::string_view(isa) == value;
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
