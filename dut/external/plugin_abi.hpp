#pragma once
// A plugin library bound to its entry points, speaking ABI version 2 to its callers whichever
// version it exports (a version-1 plugin is adapted here). One implementation for the in-process
// loader (plugin_dut.cpp) and the worker process (plugin_worker.cpp).
#include <cstdint>
#include <string>

#include "swa/dut_v1.h"
#include "swa/dut_v2.h"

namespace swa::dut {

enum class PluginCall : int32_t { load = 0, supports = 1, prefill = 2, chunked_prefill = 3, decode_step = 4 };

class BoundPlugin {
 public:
  // Loads `path` (never unloaded on success), binds every entry point of the version it exports
  // (2 preferred) and asks it to describe itself. Empty on success; otherwise what is wrong, to
  // follow "plugin PATH ": "cannot be loaded: ...", "does not export swa_dut_v2_prefill (...)",
  // "speaks ABI version 3; this harness speaks 1 and 2", "describes itself with params_size 8 ...".
  std::string open(const std::string& path);

  uint32_t abi_version() const { return version_; }
  const swa_dut_v2_traits& traits() const { return traits_; }
  // The exported function behind a call, for messages: "swa_dut_v1_prefill".
  std::string function_name(PluginCall call) const { return entry_point_name(call, version_); }
  static std::string entry_point_name(PluginCall call, uint32_t version);

  // The ABI's functions; `status` is set up (struct_size, kernel_ms = -1) by the caller.
  int supports(const swa_dut_v2_params& p, swa_dut_v2_status& status) const;
  int prefill(const swa_dut_v2_params& p, swa_dut_v2_status& status) const;
  int chunked_prefill(const swa_dut_v2_params& p, swa_dut_v2_cache& cache, int chunk_index,
                      swa_dut_v2_status& status) const;
  int decode_step(const swa_dut_v2_params& p, swa_dut_v2_cache& cache, int step, swa_dut_v2_status& status) const;

 private:
  std::string bind_v1(void* handle);
  std::string bind_v2(void* handle);

  uint32_t version_ = 0;
  swa_dut_v2_traits traits_{};
  struct V1 {
    const char* (*name)() = nullptr;
    int (*supports)(const swa_dut_v1_params*, char*, size_t) = nullptr;
    int (*prefill)(const swa_dut_v1_params*, swa_dut_v1_error*) = nullptr;
    int (*chunked_prefill)(const swa_dut_v1_params*, swa_dut_v1_cache*, int, swa_dut_v1_error*) = nullptr;
    int (*decode_step)(const swa_dut_v1_params*, swa_dut_v1_cache*, int, swa_dut_v1_error*) = nullptr;
  } v1_;
  struct V2 {
    int (*describe)(swa_dut_v2_traits*) = nullptr;
    int (*supports)(const swa_dut_v2_params*, swa_dut_v2_status*) = nullptr;
    int (*prefill)(const swa_dut_v2_params*, swa_dut_v2_status*) = nullptr;
    int (*chunked_prefill)(const swa_dut_v2_params*, swa_dut_v2_cache*, int, swa_dut_v2_status*) = nullptr;
    int (*decode_step)(const swa_dut_v2_params*, swa_dut_v2_cache*, int, swa_dut_v2_status*) = nullptr;
  } v2_;
};

// A status ready for a call: struct_size set, kernel_ms = -1, no message.
swa_dut_v2_status fresh_status();

}  // namespace swa::dut
