#pragma once
// The same-run peer of swa-bench's CPU rows: PyTorch CPU attention with an explicit window mask
// (harness/bench/torch_cpu_swa.py), when the Python given has torch (Debian's python3-torch, from
// scripts/bench-packages.txt). Without it the bench prints a note and goes on.
#include <string>
#include <vector>

#include "cases.hpp"
#include "swa/platform/install_layout.hpp"

namespace swa::bench {

struct TorchCpuOptions {
  std::string python = "/usr/bin/python3";  // "" skips PyTorch
  std::string script = platform::installed_or_built(std::string(platform::kInstalledShare) + "/bench/torch_cpu_swa.py", SWA_TORCH_CPU_SCRIPT);
};

// One row "torch_<case_name>" (dut torch-sdpa or torch-eager) timing PyTorch on the case's shape,
// prefill or one decode step, or a note in `notes` saying why there is none.
void torch_cpu_row(const TorchCpuOptions& options, const BenchSettings& settings, const std::string& case_name,
                   DType dtype, const Shape& shape, bool decode, std::vector<PerfRow>& rows,
                   std::vector<std::string>& notes);

}  // namespace swa::bench
