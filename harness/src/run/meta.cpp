#include "swa/harness/run/meta.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>

#include "swa/harness/base/host.hpp"
#include "swa/harness/duts/dut_registry.hpp"

#ifndef SWA_VERSION
#define SWA_VERSION "unknown"
#endif
#ifndef SWA_GIT_COMMIT
#define SWA_GIT_COMMIT "unknown"
#endif

namespace swa::harness {

std::string version_line(const std::string& program) {
  const Meta m = collect_meta("", "", "");
  return program + " " + m.tool_version + " (commit " + m.git_commit + ", " + m.compiler + ")";
}

Meta collect_meta(const std::string& sweep_file, const std::string& sweep_text, const std::string& command) {
  Meta m;
  m.tool_version = SWA_VERSION;
  m.git_commit = SWA_GIT_COMMIT;
#if defined(__clang__)
  m.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  m.compiler = "g++ " __VERSION__;
#endif
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  m.host = host;
  m.cpu = cpu_model();
  m.cpu_kernels = cpu_kernel_path();
  m.gpu = cuda_dut_built() ? cuda_device() : "none (CUDA DUT not built)";
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m.start_time = stamp;
  m.sweep_file = sweep_file;
  m.sweep_text = sweep_text;
  m.command = command;
  return m;
}

}  // namespace swa::harness
