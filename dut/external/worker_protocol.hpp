#pragma once
// The messages between the harness and `swa-dut-worker`, the process that hosts a plugin so that its
// crashes and hangs cost one call, not the sweep. One SOCK_SEQPACKET message each way per call; the
// tensors travel in a memfd the harness maps, fills and passes with the request (SCM_RIGHTS).
// Pointers inside the ABI structs are sent as offsets into that memfd, plus one (0 stays NULL).
// A worker keeps one memfd across schedules: it is sent with the first request that uses it (a new
// arena_id, when it had to grow), and later requests name the same arena_id and send no descriptor.
// Each request carries a sequence number that its reply repeats: a reply to anything else (a second
// answer, from a copy of the worker that a plugin forked) is refused, and the worker with it.
#include <cstddef>
#include <cstdint>

#include "plugin_abi.hpp"
#include "swa/dut_v2.h"

namespace swa::dut::worker {

using Op = PluginCall;  // load is the hello: the worker loads the plugin and describes it

struct Request {
  std::uint64_t sequence = 0;
  Op op = Op::load;
  int32_t index = 0;  // chunk_index or step
  std::uint64_t arena_id = 0;  // 0: no tensors (hello)
  std::uint64_t arena_bytes = 0;
  // hello: how long the worker polls for each next request before it sleeps on the socket. A call
  // that starts on a core that just woke from idle runs with cold caches: on ci.yaml through python:
  // the kernel's calls under 0.5 ms took 1.25-1.35x their time in one Python process, and polling
  // for 1 ms took 0.5 s off a 16 s run. The harness asks for it only where its job has a core to spare.
  std::uint32_t spin_us = 0;
  swa_dut_v2_params params{};
  swa_dut_v2_cache cache{};
};

struct Reply {
  std::uint64_t sequence = 0;  // the request's
  int32_t rc = 0;  // the plugin function's return value (supports: 1 run, 0 skip)
  swa_dut_v2_status status = fresh_status();
  // hello: whether the plugin loaded (the ABI version it speaks, else 0), what it says of itself,
  // or why it cannot be loaded (BoundPlugin::open's words).
  uint32_t abi_version = 0;
  swa_dut_v2_traits traits{};
  char load_error[512] = {};
};

template <class T>
T* encode(std::size_t offset) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(offset) + 1);
}
template <class T>
T* decode(T* encoded, unsigned char* base) {
  const auto v = reinterpret_cast<std::uintptr_t>(encoded);
  return v == 0 ? nullptr : reinterpret_cast<T*>(base + (v - 1));
}

}  // namespace swa::dut::worker
