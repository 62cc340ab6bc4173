#include "swa/harness/duts/dut_registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "swa/dut/baseline_dut.hpp"
#include "swa/dut/cpu_dut.hpp"
#include "swa/dut/mutant_dut.hpp"
#include "swa/dut/isolated_plugin.hpp"
#include "swa/dut/plugin_dut.hpp"
#include "swa/harness/duts/exec_dut.hpp"
#include "swa/platform/install_layout.hpp"
#include "swa/platform/process_memory.hpp"
#ifndef SWA_HAVE_CUDA_DUT
#define SWA_HAVE_CUDA_DUT 0
#endif
#if SWA_HAVE_CUDA_DUT
#include "swa/dut/cuda_dut.hpp"
#endif

namespace swa::harness {

namespace {

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

std::int64_t default_worker_memory_bytes(int jobs) {
  const std::int64_t half = platform::physical_memory_bytes() / 2 / std::max(jobs, 1);
  return std::max<std::int64_t>(half, std::int64_t{1} << 30);
}

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

namespace {

dut::WorkerLimits worker_limits(const DutOptions& o) { return {o.plugin_call_timeout_seconds, o.worker_memory_bytes, o.fresh_worker}; }

std::unique_ptr<dut::Dut> make_plugin(std::string_view path, const DutOptions& o) {
  // dlopen("") would be the harness itself, and its message about missing symbols a puzzle.
  if (path.empty()) throw std::invalid_argument("'plugin:' needs the path of the plugin after the colon (plugin:PATH.so)");
  try {
    return o.plugins_in_process ? dut::load_plugin(std::string(path))
                                : dut::load_isolated_plugin(std::string(path), worker_limits(o));
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
}

// python:TARGET:FUNCTION[:key=value...]: libswa_python_dut.so (dut/python) hosted like any plugin, told
// its target through its environment; the target's own errors come back from its load (exit 2).
std::unique_ptr<dut::Dut> make_python(std::string_view target, const DutOptions& o) {
  if (target.find(':') == std::string_view::npos || target.front() == ':' || target.back() == ':')
    throw std::invalid_argument("'python:" + std::string(target) +
                                "' is not python:TARGET:FUNCTION[:key=value...] (TARGET a module name or a .py file)");
  const char* env = std::getenv("SWA_PYTHON_DUT_LIBRARY");
  const std::string library =
      env && *env ? std::string(env)
                  : platform::installed_or_built(std::string(platform::kInstalledLibexec) + "/libswa_python_dut.so", SWA_PYTHON_DUT_PATH);
  dut::PluginHosting hosting{"python:" + std::string(target), {"SWA_PYTHON_DUT=" + std::string(target)}};
  try {
    return o.plugins_in_process ? dut::load_plugin(library, hosting)
                                : dut::load_isolated_plugin(library, worker_limits(o), hosting);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
}

std::unique_ptr<dut::Dut> make_cuda(std::string_view, const DutOptions&) {
#if SWA_HAVE_CUDA_DUT
  return dut::make_cuda_dut();  // without a device it skips every scenario, saying why
#else
  return std::make_unique<CudaNotBuilt>();
#endif
}

}  // namespace

const std::vector<DutKind>& dut_kinds() {
  static const std::vector<DutKind> kinds = {
      {"baseline", "baseline",
       "the same-precision baseline (`golden/baseline.hpp`); the reference DUT until the CPU kernels exist",
       [](std::string_view, const DutOptions&) { return dut::make_baseline_dut(); }},
      {"cpu", "cpu", "the OpenMP CPU kernels (`dut/cpu`)",
       [](std::string_view, const DutOptions&) { return dut::make_cpu_dut(); }},
      {"cuda", "cuda", "the CUDA kernels (`dut/cuda`); a skip saying why on a machine without a usable GPU", make_cuda},
      {"mutant:", "mutant:<fault>",
       "the mutants' kernel with one planted fault each (dut/mutants/README.md); `mutant:none` and "
       "`mutant:none_reversed` are correct controls",
       [](std::string_view fault, const DutOptions&) { return dut::make_mutant(*dut::parse_fault(fault)); },
       [](std::string_view fault) { return dut::parse_fault(fault).has_value(); }},
      {"plugin:", "plugin:PATH.so",
       "a shared library exporting the C ABI of `dut/external/include/swa/dut_v2.h` (or version 1, `dut_v1.h`), "
       "hosted in a worker process", make_plugin},
      {"python:", "python:TARGET:FUNCTION[:key=value...]",
       "a Python function (a `.py` file or a module), imported once per worker (dut/python/README.md)", make_python},
      {"exec:", "exec:'COMMAND ...'",
       "another process, through the HDF5 process protocol (dut/external/EXEC_PROTOCOL.md)",
       [](std::string_view command, const DutOptions& o) {
         return make_exec_dut(std::string(command), o.exec_timeout_seconds);
       },
       [](std::string_view command) { return !command.empty(); }},
  };
  return kinds;
}

std::string dut_kinds_table() {
  std::string out = "| name | what |\n|---|---|\n";
  for (const DutKind& k : dut_kinds()) out += "| `" + std::string(k.choice) + "` | " + std::string(k.what) + " |\n";
  return out;
}

std::string dut_choices() {
  std::string out;
  for (const DutKind& k : dut_kinds())
    out += (out.empty() ? "" : "|") +
           (k.name == "mutant:" ? "mutant:<" + dut::fault_choices() + ">" : std::string(k.choice));
  return out;
}

std::string dut_option_help() {
  std::string kinds;
  for (const DutKind& k : dut_kinds()) kinds += (kinds.empty() ? "" : ", ") + std::string(k.choice);
  return "comma-separated DUTs, replacing the sweep's: " + kinds +
         " (exec: only alone, the rest of the value is its command); LABEL=NAME names one on the console";
}

LabeledDut split_dut_label(const std::string& name) {
  const auto eq = name.find('=');
  if (eq == std::string::npos || !dut::is_short_name(std::string_view(name).substr(0, eq))) return {{}, name};
  return {name.substr(0, eq), name.substr(eq + 1)};
}

std::vector<std::string> console_labels(const std::vector<std::string>& names) {
  std::vector<std::string> labels;
  for (const auto& full : names) {
    LabeledDut d = split_dut_label(full);
    if (d.label.empty()) try {
        d.label = make_dut(full)->traits().name;
      } catch (const std::exception&) {
      }
    labels.push_back(d.label.empty() ? full : d.label);
  }
  std::vector<std::string> unique = labels;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (std::count(labels.begin(), labels.end(), labels[i]) > 1) unique[i] = names[i];
  return unique;
}

std::unique_ptr<dut::Dut> make_dut(const std::string& labeled, const DutOptions& options) {
  const std::string name = split_dut_label(labeled).name;
  for (const DutKind& k : dut_kinds()) {
    const bool prefix = k.name.back() == ':';
    if (!prefix && name == k.name) return k.make({}, options);
    if (prefix && name.compare(0, k.name.size(), k.name) == 0) {
      const std::string_view argument = std::string_view(name).substr(k.name.size());
      if (!k.accepts || k.accepts(argument)) return k.make(argument, options);
    }
  }
  throw std::invalid_argument("unknown DUT '" + name + "' (known: " + dut_choices() + ")");
}

}  // namespace swa::harness
