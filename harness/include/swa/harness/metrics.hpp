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
Comparison compare(std::span<const float> out, std::span<const double> ref, DType dtype, double threshold);

}  // namespace swa::harness
