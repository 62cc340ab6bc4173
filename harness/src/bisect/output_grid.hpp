#pragma once
// An output stored through a narrower type. Every element of a row a DUT writes in the case's dtype
// carries at most that dtype's significant bits; a kernel that rounds its output through a narrower
// type first (bf16 on the way to fp16, fp16 on the way to fp32) leaves every element on the
// narrower type's grid. The bits are counted on the whole output, and the golden rounded the same
// way is compared with the DUT's output row by row: a reproduction.
#include <optional>
#include <vector>

#include "finding.hpp"
#include "swa/harness/case/problem.hpp"

namespace swa::harness {

// nullopt unless every finite element of the output lies on a grid narrower than the dtype's and
// the golden rounded through that type gives every row within its limit.
std::optional<Finding> output_through_narrower_type(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                                    const std::vector<double>& row_limit);

}  // namespace swa::harness
