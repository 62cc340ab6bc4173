#pragma once
// A ring cache's slot rule fitted to the slots the DUT filled: position p of sequence b sits at slot
// (p - base_b) mod W; the DUT's rule is read off every slot that holds an input row, and held against
// named rules a kernel can take it from (the spec's base, the first sequence's for every sequence,
// the whole prompt's, the sequence's, none; a ring one slot short; a call's write whose wrapped part
// starts at slot k). A rule is named only when every slot that holds a row agrees with it, most of
// the differing slots (zeros included) do, and so does every slot the DUT has right in the calls
// whose model positions the cache check recorded (CacheMismatch::model_positions).
#include <optional>
#include <string>
#include <vector>

#include "finding.hpp"
#include "swa/harness/judge/cache_check.hpp"
#include "swa/params.hpp"

namespace swa::harness {

std::optional<Finding> fit_ring_slot_rule(const std::vector<CacheMismatch>& mismatches, const AttnParams& p);

}  // namespace swa::harness
