#pragma once
#include <cstdint>

#include "swa/host_device.hpp"

namespace swa {

// Slot arithmetic of a rotating KV cache of `capacity` slots, shared by the golden cache model and
// the kernels. Position p lives in slot (p - base) mod capacity.
//  - modulo (Mistral): base = 0.
//  - compact (the ring-cache patent): a first write of k > capacity tokens keeps its last
//    `capacity` tokens in slots 0..capacity-1, so base = k - capacity; later tokens go to
//    (last slot + 1) mod capacity, which is the same formula.
// Positions below base are never stored.
struct RingGeometry {
  std::int64_t capacity = 0;
  std::int64_t base = 0;
};

SWA_HOST_DEVICE constexpr std::int64_t compact_ring_base(std::int64_t first_write_len, std::int64_t capacity) {
  return first_write_len > capacity ? first_write_len - capacity : 0;
}

SWA_HOST_DEVICE constexpr std::int64_t ring_slot(RingGeometry g, std::int64_t pos) {
  const std::int64_t r = (pos - g.base) % g.capacity;
  return r < 0 ? r + g.capacity : r;
}

// Position held by `slot` once every position in [base, newest_pos] was written in order;
// -1 when the slot was never written.
SWA_HOST_DEVICE constexpr std::int64_t ring_slot_position(RingGeometry g, std::int64_t slot,
                                                          std::int64_t newest_pos) {
  std::int64_t back = ring_slot(g, newest_pos) - slot;
  if (back < 0) back += g.capacity;
  const std::int64_t pos = newest_pos - back;
  return pos >= g.base ? pos : -1;
}

}  // namespace swa
