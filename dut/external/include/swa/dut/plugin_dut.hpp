#pragma once
// A DUT loaded into this process from a shared library that exports the C ABI of swa/dut_v2.h (or v1)
// (`--in-process`: for gdb). Each library is loaded once per run and never unloaded.
#include <memory>
#include <string>

#include "swa/dut/plugin_hosting.hpp"
#include "swa/dut/dut.hpp"

namespace swa::dut {

// Throws std::runtime_error naming the library and the problem: cannot load, a missing symbol,
// an ABI version other than SWA_DUT_V1_ABI_VERSION.
// `hosting.env` is set in this process before the library is loaded.
std::unique_ptr<Dut> load_plugin(const std::string& path, const PluginHosting& hosting = {});

}  // namespace swa::dut
