#pragma once
// Comparison of two tensors of one shape: knows nothing about attention.
#include <cstdint>
#include <span>

#include "swa/dtype.hpp"

namespace swa::harness {

struct Comparison {
  std::int64_t elements = 0;
  std::int64_t nan_count = 0;
  std::int64_t inf_count = 0;
  std::int64_t first_nonfinite = -1;  // flat index of the first NaN/Inf, -1 if none
  // Over the finite elements:
  double max_abs = 0;    // max |out - ref|
  double max_rel = 0;    // max |out - ref| / max(|ref|, rel_floor)
  double rel_floor = 0;  // 1e-2 * max|ref|: keeps near-zero outputs from dominating max_rel
  double mean_abs = 0;
  double rms = 0;
  double rel_l2 = 0;     // ||out - ref|| / ||ref||
  double nmse = 0;       // sum (out - ref)^2 / sum ref^2 (llama.cpp's metric)
  double cosine = 0;     // out . ref / (||out|| ||ref||)
  std::int64_t max_ulp = 0;  // in the dtype, against ref rounded to the dtype
  double mean_ulp = 0;
  std::int64_t worst_index = -1;  // flat index of max_abs
  std::int64_t over_threshold = 0;
  double ref_max_abs = 0;  // max |ref|: a reference of zeros is never compared on
  double out_max_abs = 0;
};

// `threshold` counts the elements with |out - ref| above it (pass 0 to skip).
// Eight elements at a time: the sums run in eight lanes (element i in lane i mod 8, in index order)
// added in a fixed tree at the end, so their bits are the same on every machine but may differ in the
// last place from a serial sum's; counts, maxima and the worst index are exact as in any order.
Comparison compare(std::span<const float> out, std::span<const double> ref, DType dtype, double threshold);

// The error norms a verdict needs per phase, over the elements [first, last) of each range (a
// phase's rows) without copying them out: compare's max_abs, rel_l2 and nmse of those elements
// (NaN and Inf outputs left out), at a fraction of its cost. Sums in eight lanes as compare's,
// restarting at lane 0 with each range.
struct ErrorNorms {
  double max_abs = 0, rel_l2 = 0, nmse = 0;
};
struct ElementRange {
  std::int64_t first = 0, last = 0;
};
ErrorNorms error_norms(std::span<const float> out, std::span<const double> ref, std::span<const ElementRange> ranges);

}  // namespace swa::harness
