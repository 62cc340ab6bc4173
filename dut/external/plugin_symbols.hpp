#pragma once
// The entry points of swa/dut_v1.h bound from a library: one list for the in-process loader
// (plugin_dut.cpp) and the worker process (plugin_worker.cpp).
#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "swa/dut_v1.h"

namespace swa::dut {

struct PluginSymbols {
  uint32_t (*abi_version)() = nullptr;
  const char* (*name)() = nullptr;
  int (*supports)(const swa_dut_v1_params*, char*, size_t) = nullptr;
  int (*prefill)(const swa_dut_v1_params*, swa_dut_v1_error*) = nullptr;
  int (*chunked_prefill)(const swa_dut_v1_params*, swa_dut_v1_cache*, int, swa_dut_v1_error*) = nullptr;
  int (*decode_step)(const swa_dut_v1_params*, swa_dut_v1_cache*, int, swa_dut_v1_error*) = nullptr;
};

// Loads `path` (never unloaded on success) and binds every entry point, the ABI version checked
// first. Empty on success; otherwise what is wrong, to follow "plugin PATH ": "cannot be loaded:
// ...", "does not export swa_dut_v1_name (...)", "speaks ABI version 2; this harness speaks 1".
inline std::string open_plugin(const std::string& path, PluginSymbols& s) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return std::string("cannot be loaded: ") + dlerror();
  auto bind = [&](const char* symbol, auto& out) {
    out = reinterpret_cast<std::remove_reference_t<decltype(out)>>(dlsym(handle, symbol));
    return out ? std::string()
               : std::string("does not export ") + symbol + " (every swa_dut_v1_* function of swa/dut_v1.h is required)";
  };
  std::string error = bind("swa_dut_v1_abi_version", s.abi_version);
  if (error.empty() && s.abi_version() != SWA_DUT_V1_ABI_VERSION)
    error = "speaks ABI version " + std::to_string(s.abi_version()) + "; this harness speaks " +
            std::to_string(SWA_DUT_V1_ABI_VERSION);
  if (error.empty()) error = bind("swa_dut_v1_name", s.name);
  if (error.empty()) error = bind("swa_dut_v1_supports", s.supports);
  if (error.empty()) error = bind("swa_dut_v1_prefill", s.prefill);
  if (error.empty()) error = bind("swa_dut_v1_chunked_prefill", s.chunked_prefill);
  if (error.empty()) error = bind("swa_dut_v1_decode_step", s.decode_step);
  if (!error.empty()) dlclose(handle);
  return error;
}

}  // namespace swa::dut
