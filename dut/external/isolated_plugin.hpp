#pragma once
// A plugin DUT hosted in a worker process (swa-dut-worker): a segfault, an abort or a call over the
// time limit fails that call with the signal or the timeout and the entry point, and the next call
// starts a fresh worker; the harness and the sweep go on. Workers are pooled per plugin, so a plugin
// is loaded once per run, not once per scenario.
#include <memory>
#include <string>

#include "plugin_hosting.hpp"
#include "swa/dut/dut.hpp"

namespace swa::dut {

// Throws std::runtime_error naming the library and the problem (cannot load, a missing symbol, an
// ABI version other than SWA_DUT_V1_ABI_VERSION, a crash while loading). timeout_seconds <= 0: none.
std::unique_ptr<Dut> load_isolated_plugin(const std::string& path, double timeout_seconds,
                                          const PluginHosting& hosting = {});

}  // namespace swa::dut
