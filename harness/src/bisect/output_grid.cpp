#include "output_grid.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "row_runs.hpp"
#include "swa/dtype.hpp"

namespace swa::harness {
namespace {

// The significant bits of a float (its implicit leading bit included); 0 for zero.
int significant_bits(float f) {
  if (f == 0.f) return 0;
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t exponent = (u >> 23) & 0xff, mantissa = u & 0x7fffff;
  if (exponent == 0) return 24 - std::countr_zero(mantissa);  // subnormal: no implicit bit, still a count
  return 24 - std::countr_zero(mantissa | 0x800000);
}

int bits_of(DType t) { return t == DType::fp32 ? 24 : t == DType::fp16 ? 11 : 8; }

}  // namespace

std::optional<Finding> output_through_narrower_type(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                                    const std::vector<double>& row_limit) {
  using namespace key_run_rules;
  const AttnParams& p = pr.params;
  if (out.size() != ref.size() || out.empty()) return std::nullopt;
  int most = 0;
  std::size_t finite = 0;
  for (double x : out)
    if (std::isfinite(x)) most = std::max(most, significant_bits(static_cast<float>(x))), ++finite;
  if (finite < 64) return std::nullopt;  // too few elements for their bits to tell a type
  for (const DType narrower : {DType::bf16, DType::fp16}) {
    if (bits_of(narrower) >= bits_of(p.dtype) || most > bits_of(narrower)) continue;
    // The golden rounded through the narrower type, then to the dtype: the DUT's output row by row?
    std::vector<double> rounded(ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i)
      rounded[i] = round_to(p.dtype, round_to(narrower, static_cast<float>(ref[i])));
    std::int64_t rows = 0, failing = 0, given = 0;
    for (int b = 0; b < p.batch; ++b)
      for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
        for (int h = 0; h < p.heads_q; ++h) {
          const RowPlace r = place(p, b, t, h);
          ++rows;
          failing += !row_passes(pr, out, ref, row_limit, r);
          given += row_passes(pr, out, rounded, row_limit, r);
        }
    if (given != rows || failing == 0) continue;
    const std::string n(dtype_name(narrower)), dt(dtype_name(p.dtype));
    Finding f{"output_rounded_through_" + n, FindingSource::none,
              {"Every one of the output's " + std::to_string(finite) + " finite elements has at most " + std::to_string(most) +
                   " significant bits: the grid of " + n + " (" + std::to_string(bits_of(narrower)) + "), not of the case's " + dt +
                   " (" + std::to_string(bits_of(p.dtype)) + "): the kernel rounds its output through " + n + " before it stores " +
                   dt + ".",
               "Reproduced: the golden rounded to " + n + " and then to " + dt + " gives every one of the " + std::to_string(rows) +
                   " (token, head) rows within its limit (the " + std::to_string(failing) + " failing ones included)."},
              Confidence::high,
              "computed: the golden through " + n + " reproduces every row, and no element has a bit " + n + " lacks"};
    f.reproduced = true;
    return f;
  }
  return std::nullopt;
}

}  // namespace swa::harness
