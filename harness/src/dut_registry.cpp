#include "swa/harness/dut_registry.hpp"

#include <stdexcept>

#include "baseline_dut.hpp"
#include "cpu_dut.hpp"
#include "mutant_dut.hpp"
#include "plugin_dut.hpp"
#include "swa/harness/exec_dut.hpp"

namespace swa::harness {

namespace {
double exec_timeout_seconds = 300;
}

void set_exec_timeout(double seconds) { exec_timeout_seconds = seconds; }

std::string dut_choices() {
  return "baseline|cpu|mutant:<" + dut::fault_choices() + ">|plugin:PATH.so|exec:'COMMAND ...'";
}

std::unique_ptr<dut::Dut> make_dut(const std::string& name) {
  if (name == "baseline") return dut::make_baseline_dut();
  if (name == "cpu") return dut::make_cpu_dut();
  if (name.rfind("plugin:", 0) == 0) {
    try {
      return dut::load_plugin(name.substr(7));
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
  }
  if (name.rfind("exec:", 0) == 0 && name.size() > 5) return make_exec_dut(name.substr(5), exec_timeout_seconds);
  const std::string prefix = "mutant:";
  if (name.rfind(prefix, 0) == 0)
    if (auto fault = dut::parse_fault(name.substr(prefix.size()))) return dut::make_mutant(*fault);
  throw std::invalid_argument("unknown DUT '" + name + "' (known: " + dut_choices() + ")");
}

}  // namespace swa::harness
