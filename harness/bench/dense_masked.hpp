#pragma once
#include "swa/params.hpp"

namespace swa::bench {

// What a user without this tool writes: per head, the whole S x S score matrix (Eigen GEMM), the
// band mask as -inf, a row softmax, then P.V. fp32 storage only.
void dense_masked_attention(const AttnParams& p);

}  // namespace swa::bench
