#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "swa/dtype.hpp"
#include "swa/kv_format.hpp"

namespace swa::harness {

// How Q, K and V are drawn. Values are drawn in double, rounded to float, then to the run's dtype.
enum class InputDistribution : std::uint8_t {
  normal,       // N(0, 1)
  uniform,      // U(-1, 1)
  large_logit,  // N(0, s^2) for Q and K, s chosen so raw scores q.k reach about fp16's range / 4
  outlier,      // N(0, 1) + N(0, 100) * Bernoulli(0.001), as in the FlashAttention-3 paper (variance 100)
  constant_rows,  // every K row of a head is the same vector: ties, exactly uniform probabilities
};

inline constexpr InputDistribution kAllInputDistributions[] = {
    InputDistribution::normal, InputDistribution::uniform, InputDistribution::large_logit, InputDistribution::outlier,
    InputDistribution::constant_rows};

std::string_view distribution_name(InputDistribution d);  // normal|uniform|large-logit|outlier|constant-rows
std::optional<InputDistribution> parse_distribution(std::string_view name);
std::string distribution_choices();

enum class TensorRole : std::uint32_t { q = 1, k = 2, v = 3, sinks = 4, descales = 5, pages = 6 };

// Element i of the tensor, for a tensor laid out as rows of `row_elems` elements (heads x dims).
// Deterministic in (seed, role, i) alone.
std::vector<float> generate_tensor(std::uint64_t seed, TensorRole role, InputDistribution dist, std::int64_t rows,
                                   std::int64_t row_elems, int head_size, DType dtype);

// One attention-sink logit per query head (role `sinks`): N(0, 2^2) whatever the distribution of Q,
// K and V, so that some heads' sinks outweigh their keys and some do not; rounded to the dtype.
std::vector<float> generate_sinks(std::uint64_t seed, int heads_q, DType dtype);

// Per-tensor descale factor of an FP8 KV cache for a K or V tensor of absolute maximum `amax`, as a
// calibration computes it: amax / fp8_max times a margin drawn from the seed (index 0 for K, 1 for
// V). Half the draws leave headroom (margin 1.05..1.6: amax maps below the largest code, what a
// serving stack picks); the others saturate (0.55..0.95: the largest values clip, where a kernel
// without saturation makes NaN or inf). Never a power of two nor a 16-bit float (off_coarse_grids):
// FP8's grid is invariant under powers of two, so such a descale hides a kernel that reads V with
// K's descale or applies a descale rounded to fp16/bf16. amax 0 gives about 1.
float draw_kv_descale(std::uint64_t seed, KvFormat format, int tensor_index, double amax);
// `descale` moved off the grids a power-of-two or 16-bit-float descale would sit on: times `away`
// (1.2 keeps headroom, 1/1.2 saturation) when within 0.07 of a power of two in log2, and with its
// lowest mantissa bit set.
float off_coarse_grids(double descale, double away);

// The initial order of a paged cache's pool (AttnParams::page_order): a permutation of 0..pages-1,
// Fisher-Yates with Philox draws (role `pages`), so physical pages differ from logical ones.
std::vector<std::int32_t> draw_page_order(std::uint64_t seed, int pages);

}  // namespace swa::harness
