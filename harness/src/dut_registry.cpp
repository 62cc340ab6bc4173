#include "swa/harness/dut_registry.hpp"

#include <stdexcept>

#include "baseline_dut.hpp"
#include "cpu_dut.hpp"
#include "mutant_dut.hpp"

namespace swa::harness {

std::string dut_choices() { return "baseline|cpu|mutant:<" + dut::fault_choices() + ">"; }

std::unique_ptr<dut::Dut> make_dut(const std::string& name) {
  if (name == "baseline") return dut::make_baseline_dut();
  if (name == "cpu") return dut::make_cpu_dut();
  const std::string prefix = "mutant:";
  if (name.rfind(prefix, 0) == 0)
    if (auto fault = dut::parse_fault(name.substr(prefix.size()))) return dut::make_mutant(*fault);
  throw std::invalid_argument("unknown DUT '" + name + "' (known: " + dut_choices() + ")");
}

}  // namespace swa::harness
