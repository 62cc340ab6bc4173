#include "swa/harness/case/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <numeric>

#include "swa/enum_names.hpp"
#include "swa/harness/base/philox.hpp"

namespace swa::harness {

SWA_ENUM_NAMES(InputDistribution, distribution_name, parse_distribution, kAllInputDistributions,
               {InputDistribution::normal, "normal"}, {InputDistribution::uniform, "uniform"},
               {InputDistribution::large_logit, "large-logit"}, {InputDistribution::outlier, "outlier"},
               {InputDistribution::constant_rows, "constant-rows"})

std::string distribution_choices() { return enum_choices(kAllInputDistributions, distribution_name); }

namespace {

// Four independent uniforms for element `index` of stream `role`.
PhiloxBlock draw(std::uint64_t seed, TensorRole role, std::uint64_t index) {
  return philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                        static_cast<std::uint32_t>(role), 0u},
                       {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

double box_muller(std::uint32_t a, std::uint32_t b) {
  return std::sqrt(-2.0 * std::log(philox_uniform(a))) * std::cos(2.0 * std::numbers::pi * philox_uniform(b));
}

// large-logit's scale of Q and K (V stays N(0, 1)): q.k ~ N(0, s^4 D); 4 sigma of it at 65504 / 4.
double large_logit_sigma(TensorRole role, int head_size) {
  return role == TensorRole::v ? 1.0 : std::sqrt(65504.0 / 16.0 / std::sqrt(double(head_size)));
}

double sample(std::uint64_t seed, TensorRole role, InputDistribution dist, std::uint64_t index, int head_size) {
  const PhiloxBlock r = draw(seed, role, index);
  switch (dist) {
    case InputDistribution::normal:
    case InputDistribution::constant_rows: return box_muller(r[0], r[1]);
    case InputDistribution::uniform: return 2.0 * philox_uniform(r[0]) - 1.0;
    case InputDistribution::large_logit: return large_logit_sigma(role, head_size) * box_muller(r[0], r[1]);
    case InputDistribution::outlier: {
      const double base = box_muller(r[0], r[1]);
      const bool spike = philox_uniform(r[2]) < 0.001;
      return spike ? base + 10.0 * box_muller(r[3], r[2] ^ 0x5bd1e995u) : base;
    }
  }
  return 0.0;
}

// Elements first .. first + n - 1 (n <= kBlock) of a stream: Philox for the whole block at once, then
// each transcendental over the block, so the independent calls overlap. The same operations on the
// same values as sample(), only in another order: bit for bit its result (tests/test_inputs.cpp).
constexpr int kBlock = 64;

void sample_block(std::uint64_t seed, TensorRole role, InputDistribution dist, std::uint64_t first, int n, int head_size,
                  float* out) {
  if (dist == InputDistribution::outlier) {  // rare spikes, drawn per element
    for (int i = 0; i < n; ++i) out[i] = static_cast<float>(sample(seed, role, dist, first + i, head_size));
    return;
  }
  std::uint32_t r[4][kBlock];
  philox4x32_10_lanes<kBlock>(first, static_cast<std::uint32_t>(role), 0u,
                              {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}, r);
  if (dist == InputDistribution::uniform) {
    for (int i = 0; i < n; ++i) out[i] = static_cast<float>(2.0 * philox_uniform(r[0][i]) - 1.0);
    return;
  }
  double log_u[kBlock], cos_u[kBlock];
  for (int i = 0; i < n; ++i) log_u[i] = std::log(philox_uniform(r[0][i]));
  for (int i = 0; i < n; ++i) cos_u[i] = std::cos(2.0 * std::numbers::pi * philox_uniform(r[1][i]));
  if (dist == InputDistribution::large_logit) {
    const double sigma = large_logit_sigma(role, head_size);
    for (int i = 0; i < n; ++i) out[i] = static_cast<float>(sigma * (std::sqrt(-2.0 * log_u[i]) * cos_u[i]));
  } else {
    for (int i = 0; i < n; ++i) out[i] = static_cast<float>(std::sqrt(-2.0 * log_u[i]) * cos_u[i]);
  }
}

}  // namespace

std::vector<float> generate_tensor(std::uint64_t seed, TensorRole role, InputDistribution dist, std::int64_t rows,
                                   std::int64_t row_elems, int head_size, DType dtype) {
  std::vector<float> t(static_cast<std::size_t>(rows * row_elems));
  // Each element is a pure function of its index, so any thread count gives the same tensor.
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = t.data() + r * row_elems;
    // constant-rows: every K row repeats row 0.
    const std::int64_t source_row = dist == InputDistribution::constant_rows && role == TensorRole::k ? 0 : r;
    for (std::int64_t e = 0; e < row_elems; e += kBlock)
      sample_block(seed, role, dist, static_cast<std::uint64_t>(source_row * row_elems + e),
                   static_cast<int>(std::min<std::int64_t>(kBlock, row_elems - e)), head_size, row + e);
    round_all_to(dtype, row, static_cast<std::size_t>(row_elems));
  }
  return t;
}

std::vector<float> generate_sinks(std::uint64_t seed, int heads_q, DType dtype) {
  std::vector<float> sinks(static_cast<std::size_t>(heads_q));
  for (int h = 0; h < heads_q; ++h) {
    const PhiloxBlock r = draw(seed, TensorRole::sinks, static_cast<std::uint64_t>(h));
    sinks[h] = round_to(dtype, static_cast<float>(2.0 * box_muller(r[0], r[1])));
  }
  return sinks;
}

float off_coarse_grids(double descale, double away) {
  const double fraction = std::log2(descale) - std::floor(std::log2(descale));
  if (fraction < 0.07 || fraction > 0.93) descale *= away;
  auto f = static_cast<float>(std::clamp(descale, 0x1p-120, 0x1p120));
  // A low mantissa bit set, so that no 16-bit float (fp16's 11 bits, bf16's 8) holds it exactly.
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof bits);
  return f;
}

float draw_kv_descale(std::uint64_t seed, KvFormat format, int tensor_index, double amax) {
  if (!(amax > 0.0) || !std::isfinite(amax)) return off_coarse_grids(1.0, 1.2);
  const PhiloxBlock r = draw(seed, TensorRole::descales, static_cast<std::uint64_t>(tensor_index));
  const bool headroom = (r[0] & 1u) != 0;
  const double u = static_cast<double>(r[1]) * 0x1p-32;
  // Headroom: amax maps to 0.63..0.95 of the largest code. Saturation: to 1.05..1.8 of it, past
  // the midpoint to the next binade's first value, so the largest values clip.
  const double margin = headroom ? 1.05 + 0.55 * u : 0.55 + 0.4 * u;
  // Moved away from a power of two in the direction that keeps the draw's kind.
  return off_coarse_grids(amax / fp8_max(format) * margin, headroom ? 1.2 : 1 / 1.2);
}

std::vector<std::int32_t> draw_page_order(std::uint64_t seed, int pages) {
  std::vector<std::int32_t> order(static_cast<std::size_t>(std::max(pages, 0)));
  std::iota(order.begin(), order.end(), 0);
  for (int i = pages - 1; i > 0; --i) {
    const PhiloxBlock r = draw(seed, TensorRole::pages, static_cast<std::uint64_t>(i));
    const auto j = static_cast<int>(((static_cast<std::uint64_t>(r[0]) << 32 | r[1]) % static_cast<std::uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace swa::harness
