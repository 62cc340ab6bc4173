#pragma once
#include <vector>

#include "swa/params.hpp"

namespace swa::baseline {

// Naive attention the way an unoptimised framework computes it in the run's dtype (FlashAttention's
// attention_ref with upcast=False, PyTorch's math path). Rounding points, each to `p.dtype`:
//   1. q' = round(q * scale)                    (fp32 multiply)
//   2. s_j = round(q'.k_j)   fp32, eight partial sums over d mod 8 combined pairwise (a SIMD GEMM's order)
//   2b. with a soft-cap C: s_j = round(C * tanh(s_j / C))   (fp32 divide, tanh, multiply)
//   3. masked keys are dropped (-inf, exp = 0)
//   4. p_j = round(exp(s_j - max) / sum)         (fp32 max, exp, sum over keys in position order; a
//      sink logit joins max first and sum first, and has no value row)
//   5. o_d = round(sum_j p_j v_jd)               (fp32 accumulation over keys, in position order)
// With an FP8 KV format, K and V are first read as the golden reads them (kv_read_value: exact).
// For fp32 every round() is the identity, so this is plain fp32 attention. A row with no visible
// key outputs 0. It ignores the schedule: its rows are the dense definition's.
// Returns [nTokens, heads_q, head_size] contiguous, values representable in p.dtype.
std::vector<float> attention(const AttnParams& p);

}  // namespace swa::baseline
