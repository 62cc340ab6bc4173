#pragma once
// The FP8 codes a DUT stored in its KV cache, fitted (the cache check keeps every element's code of
// the slots that hold bytes of no row, with the value the kernel was to encode). Two things are
// fitted: where the codes differ from the spec's codec, as a region of the encoded values (the
// subnormals, the values whose rounding carries into the next binade, ties, values past the largest,
// a sign, a binade), exact when the codes differ on every element of the region and on no other;
// and what the DUT stores there, as a rule of the spec's code or of the value (one code toward
// zero, the value halved, zero, another rounding, the descale left out or applied twice). Nothing
// here knows a fault: only the codec's own structure.
#include <optional>
#include <vector>

#include "finding.hpp"
#include "swa/harness/judge/cache_check.hpp"
#include "swa/params.hpp"

namespace swa::harness {

// nullopt when no slot kept its codes, or no region holds every differing element.
std::optional<Finding> fit_fp8_codes(const std::vector<CacheMismatch>& mismatches, const AttnParams& p);

}  // namespace swa::harness
