#pragma once
// swa-bench --dut cuda: the CUDA DUT's kernels (device events) at the shapes, PyTorch's
// FlexAttention and SDPA at the same shapes in the same run, and decode steps against the
// bytes-over-bandwidth floor measured in the same run.
#include <string>
#include <vector>

#include "cases.hpp"
#include "swa/harness/base/id_pattern.hpp"
#include "swa/platform/install_layout.hpp"

namespace swa::bench {

struct CudaBenchOptions {
  bool quick = false;
  bool grid = false;  // also the prefill grid (grid_shapes) beside FlexAttention and SDPA
  std::string torch_python = "/usr/bin/python3";  // Debian's, which python3-torch installs into; "" skips PyTorch
  std::string torch_script = platform::installed_or_built(std::string(platform::kInstalledShare) + "/bench/torch_swa.py", SWA_TORCH_SCRIPT);
};

struct CudaBenchResult {
  std::vector<PerfRow> rows;
  double copy_bandwidth_gbps = 0;
  std::vector<std::string> notes;  // PyTorch failures and the like, printed with the targets
};

CudaBenchResult run_cuda_bench(const BenchSettings& settings, const CudaBenchOptions& options, const harness::IdPattern& filter,
                               bool progress);

void print_cuda_targets(const CudaBenchResult& result);

}  // namespace swa::bench
