#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <optional>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"

namespace swa::harness {

// How the DUTs of one command are run: a run's or a bisect's options, passed to make_dut.
struct DutOptions {
  double exec_timeout_seconds = 300;  // each exec: DUT's run of a schedule
  // plugin: DUTs run in a worker process, each call limited to plugin_call_timeout_seconds;
  // plugins_in_process loads them into the harness instead (for gdb; a crash then ends the run).
  bool plugins_in_process = false;
  double plugin_call_timeout_seconds = 300;
  // The resident memory a plugin: or python: worker may hold of its own (0: no bound); over it the
  // worker is killed and the call is an error row naming the limit. run and bisect set it from
  // --dut-memory-mb (default_worker_memory_bytes). In-process DUTs have no bound.
  std::int64_t worker_memory_bytes = 0;
  // A worker process of its own, never one another DUT of the same plugin left idle (whose state,
  // module globals included, it would carry): bisect's runs that test state across calls.
  bool fresh_worker = false;
};

// --dut-memory-mb's default: half the machine's memory shared among `jobs` workers, at least 1 GiB.
std::int64_t default_worker_memory_bytes(int jobs);

// A kind of DUT by its --dut name: "cpu", or a prefix and its argument ("plugin:" PATH).
struct DutKind {
  std::string_view name;    // "cpu", or with the argument's place: "plugin:"
  std::string_view choice;  // for messages: "plugin:PATH.so"
  std::string_view what;    // one line for `list --duts` and harness/README.md's table of DUTs
  std::unique_ptr<dut::Dut> (*make)(std::string_view argument, const DutOptions& options);
  // For a prefix kind, whether it takes this argument (nullptr: any; the plugin loader names a bad path).
  bool (*accepts)(std::string_view argument) = nullptr;
};
// baseline, cpu, cuda (a skip everywhere when built without nvcc), mutant:<fault>, plugin:PATH (a
// shared library with the C ABI of swa/dut_v2.h or dut_v1.h), python:TARGET:FUNCTION (a Python function,
// hosted by dut/python's plugin), exec:'COMMAND' (the process protocol).
const std::vector<DutKind>& dut_kinds();
// The kinds as the Markdown table harness/README.md shows (`swa-harness list --duts`).
std::string dut_kinds_table();

// The DUT a name names. Throws std::invalid_argument naming the problem (an unknown name lists the
// names it knows; a bad plugin says what is wrong with it). A name may carry the label the console
// shows: LABEL=NAME, LABEL 1 to 32 of A-Z a-z 0-9 _ . + - ("ggml=plugin:/opt/libggml_dut_v2.so").
std::unique_ptr<dut::Dut> make_dut(const std::string& name, const DutOptions& options = {});

struct LabeledDut {
  std::string label;  // empty: none given
  std::string name;   // what make_dut makes
};
LabeledDut split_dut_label(const std::string& name);

// What the console's tables call each DUT: the label given (LABEL=...), else the name the DUT gives
// itself (a plugin's traits.name), else its --dut name. Where two would share one, both keep their
// --dut names. Files and rerun commands always use the --dut names.
std::vector<std::string> console_labels(const std::vector<std::string>& names);
std::string dut_choices();
// --dut's help, from the table: each kind's form, and how a list and a label are written.
std::string dut_option_help();
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

}  // namespace swa::harness
