#pragma once
// A plugin DUT hosted in a worker process (swa-dut-worker): a segfault, an abort or a call over the
// time limit fails that call with the signal or the timeout and the entry point, and the next call
// starts a fresh worker; the harness and the sweep go on. Workers are pooled per plugin, so a plugin
// is loaded once per run, not once per scenario.
#include <cstdint>
#include <memory>
#include <string>

#include "swa/dut/plugin_hosting.hpp"
#include "swa/dut/dut.hpp"

namespace swa::dut {

// What a worker may take: each call (its load included) at most call_seconds of wall time, and at
// most memory_bytes of resident memory of its own (platform::resident_anonymous_bytes, sampled while
// a call runs). Over either, the worker is killed and the call fails saying which. <= 0: no bound.
struct WorkerLimits {
  double call_seconds = 300;
  std::int64_t memory_bytes = 0;
  bool fresh = false;  // a worker of its own, not an idle one (with its state), and not pooled after
};

// Throws std::runtime_error naming the library and the problem (cannot load, a missing symbol, an
// ABI version other than SWA_DUT_V1_ABI_VERSION, a crash, a time-out or a memory overrun while loading).
std::unique_ptr<Dut> load_isolated_plugin(const std::string& path, const WorkerLimits& limits,
                                          const PluginHosting& hosting = {});

}  // namespace swa::dut
