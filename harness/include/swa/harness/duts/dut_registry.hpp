#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"

namespace swa::harness {

// DUTs by name: baseline, cpu, cuda (when built with nvcc), mutant:<fault>, plugin:PATH (a shared library with the C ABI of
// swa/dut_v2.h or dut_v1.h), exec:'COMMAND' (the process protocol). Throws std::invalid_argument naming the
// problem (an unknown name lists the names it knows; a bad plugin says what is wrong with it).
std::unique_ptr<dut::Dut> make_dut(const std::string& name);
std::string dut_choices();
// Whether this build has the CUDA DUT, and its device ("NVIDIA H100 ... (sm_90, 132 SMs)") or why none.
bool cuda_dut_built();
std::string cuda_device();
// The CPU DUT's instruction paths in this process (dut::cpu_kernel_path).
std::string cpu_kernel_path();

// The GEMM the same-run SGEMM ceiling is timed on (dut::cpu_sgemm_name: "Eigen, x86-64-v4 avx512f").
std::string cpu_sgemm_name();
// Why SWA_CPU_ISA is refused, or nothing (dut::cpu_isa_setting_error): the commands exit 2 on it.
std::optional<std::string> cpu_isa_setting_error();
// The device's measured copy bandwidth in GB/s (read + write bytes); throws without a device or CUDA DUT.
double cuda_copy_bandwidth_gbps();
// Time limit of each exec: DUT run (default 300 s).
void set_exec_timeout(double seconds);
// plugin: DUTs run in a worker process (default), each call limited to call_timeout_seconds (default
// 300); in_process loads them into the harness instead (for gdb; a crash then ends the run).
void set_plugin_isolation(bool in_process, double call_timeout_seconds);

}  // namespace swa::harness
