#pragma once
// The messages between the harness and `swa-dut-worker`, the process that hosts a plugin so that its
// crashes and hangs cost one call, not the sweep. One SOCK_SEQPACKET message each way per call; the
// tensors travel in a memfd the harness maps, fills and passes with the request (SCM_RIGHTS).
// Pointers inside the ABI structs are sent as offsets into that memfd, plus one (0 stays NULL).
// A worker keeps one memfd across schedules: it is sent with the first request that uses it (a new
// arena_id, when it had to grow), and later requests name the same arena_id and send no descriptor.
#include <cstddef>
#include <cstdint>

#include "swa/dut_v1.h"

namespace swa::dut::worker {

enum class Op : int32_t { hello = 0, supports = 1, prefill = 2, chunked_prefill = 3, decode_step = 4 };

struct Request {
  Op op = Op::hello;
  int32_t index = 0;  // chunk_index or step
  std::uint64_t arena_id = 0;  // 0: no tensors (hello)
  std::uint64_t arena_bytes = 0;
  swa_dut_v1_params params{};
  swa_dut_v1_cache cache{};
};

struct Reply {
  int32_t rc = 0;           // the plugin function's return value (supports: 1 run, 0 skip)
  swa_dut_v1_error error{};
  char text[512] = {};  // hello: the plugin's name, or why it cannot be loaded (open_plugin); supports: the skip reason
  int32_t loaded = 0;   // hello: 1 when the plugin loaded and exports every function
};

inline const char* op_function(Op op) {
  switch (op) {
    case Op::hello: return "dlopen";
    case Op::supports: return "swa_dut_v1_supports";
    case Op::prefill: return "swa_dut_v1_prefill";
    case Op::chunked_prefill: return "swa_dut_v1_chunked_prefill";
    case Op::decode_step: return "swa_dut_v1_decode_step";
  }
  return "?";
}

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
