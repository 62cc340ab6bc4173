#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "swa/params.hpp"

namespace swa::golden {

// The fp64 reference. Inputs are read exactly (every fp32/fp16/bf16 value is a double), scores,
// softmax and P.V are computed in double with compensated (TwoSum) sums and max subtraction.
// Only keys inside the band are visited. A row with no visible key outputs 0 and lse = -inf (the sink
// logit when the layer has sinks), as
// FlashAttention does.
struct Output {
  std::vector<double> out;  // [nTokens, heads_q, head_size], contiguous
  std::vector<double> lse;  // [nTokens, heads_q]: row max + log(row sum), natural log
};

// Attention by the dense definition over absolute positions, ignoring the schedule.
Output attention_dense(const AttnParams& p);

// Attention as the schedule in `p` runs it: chunks and decode steps through the KV cache model.
// For every valid schedule this equals attention_dense up to fp64 rounding; the tests hold it to that.
Output attention_scheduled(const AttnParams& p);

// Dispatches on p.mode: prefill -> dense, otherwise scheduled.
Output run(const AttnParams& p);

// Intermediates of one query row, for diagnosis.
struct RowTrace {
  std::vector<std::int64_t> key_positions;  // visited keys, in visiting order
  std::vector<double> scores;               // scale * q.k after masking (only visible keys listed)
  std::vector<double> probabilities;
  double row_max = 0.0;
  double lse = 0.0;
  std::vector<double> out;  // [head_size]
};

RowTrace trace_row(const AttnParams& p, int sequence, int q_head, std::int64_t token);

// SHA-256 (hex) of this build's golden and baseline sources, compiler and flags: two builds with the
// same ID compute the same numbers from the same inputs. The golden cache keys entries on it.
std::string_view build_id();

}  // namespace swa::golden
