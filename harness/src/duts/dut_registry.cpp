#include "swa/harness/duts/dut_registry.hpp"

#include <stdexcept>

#include "baseline_dut.hpp"
#include "cpu_dut.hpp"
#include "mutant_dut.hpp"
#include "isolated_plugin.hpp"
#include "plugin_dut.hpp"
#include "swa/harness/duts/exec_dut.hpp"
#ifndef SWA_HAVE_CUDA_DUT
#define SWA_HAVE_CUDA_DUT 0
#endif
#if SWA_HAVE_CUDA_DUT
#include "swa/dut/cuda_dut.hpp"
#endif

namespace swa::harness {

namespace {
double exec_timeout_seconds = 300;
bool plugins_in_process = false;
double plugin_call_timeout_seconds = 300;

#if !SWA_HAVE_CUDA_DUT
// "cuda" in a build configured without nvcc: every scenario is a skip that says so, so sweep files
// can name the CUDA DUT on every machine.
class CudaNotBuilt final : public dut::Dut {
 public:
  std::string name() const override { return "cuda"; }
  dut::Support supports(const AttnParams&) const override {
    return dut::Support::skip("the CUDA DUT is not in this build: it was configured with SWA_ENABLE_CUDA=OFF or "
                              "without nvcc 12+ (install the CUDA toolkit, or configure with "
                              "-DCMAKE_CUDA_COMPILER=/path/to/nvcc)");
  }
  dut::Status prefill(const AttnParams&) override { return not_built(); }
  dut::Status chunked_prefill(const AttnParams&, dut::KvCache&, int) override { return not_built(); }
  dut::Status decode_step(const AttnParams&, dut::KvCache&, int) override { return not_built(); }

 private:
  static dut::Status not_built() { return dut::Status::failure("the CUDA DUT is not in this build"); }
};
#endif
}  // namespace

std::string cpu_kernel_path() { return dut::cpu_kernel_path(); }

std::string cpu_sgemm_name() { return dut::cpu_sgemm_name(); }

std::optional<std::string> cpu_isa_setting_error() { return dut::cpu_isa_setting_error(); }

bool cuda_dut_built() { return SWA_HAVE_CUDA_DUT != 0; }

std::string cuda_device() {
#if SWA_HAVE_CUDA_DUT
  return dut::cuda_device_description();
#else
  return "CUDA DUT not built";
#endif
}

double cuda_copy_bandwidth_gbps() {
#if SWA_HAVE_CUDA_DUT
  return dut::measure_cuda_copy_bandwidth_gbps();
#else
  throw std::runtime_error("the CUDA DUT is not in this build");
#endif
}

void set_exec_timeout(double seconds) { exec_timeout_seconds = seconds; }
void set_plugin_isolation(bool in_process, double call_timeout_seconds) {
  plugins_in_process = in_process;
  plugin_call_timeout_seconds = call_timeout_seconds;
}

std::string dut_choices() {
  return "baseline|cpu|cuda|mutant:<" + dut::fault_choices() + ">|plugin:PATH.so|exec:'COMMAND ...'";
}

std::unique_ptr<dut::Dut> make_dut(const std::string& name) {
  if (name == "baseline") return dut::make_baseline_dut();
  if (name == "cpu") return dut::make_cpu_dut();
  if (name == "cuda") {
#if SWA_HAVE_CUDA_DUT
    return dut::make_cuda_dut();  // without a device it skips every scenario, saying why
#else
    return std::make_unique<CudaNotBuilt>();
#endif
  }
  if (name.rfind("plugin:", 0) == 0) {
    try {
      return plugins_in_process ? dut::load_plugin(name.substr(7))
                                : dut::load_isolated_plugin(name.substr(7), plugin_call_timeout_seconds);
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
