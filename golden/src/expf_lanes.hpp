#pragma once
// Internal to the golden: the baseline's softmax exponentials, x[i] = std::exp(x[i] - m) in float,
// bit for bit, eight at a time where the build targets FMA.
#include <cstddef>

namespace swa::golden::detail {

// x[i] = std::exp(x[i] - m) for i in [0, n): each difference rounded to float, then glibc's expf of
// it. Where the build targets AVX2 and FMA this runs glibc's own expf algorithm (its 32-entry table
// and cubic, the same fused operations its FMA variant executes) on eight lanes, and only when a
// probe at first use finds it equal to std::exp; groups holding |x - m| >= 88, an infinity or a NaN
// go through std::exp one value at a time.
void exp_of_differences(float* x, std::size_t n, float m);

// Whether exp_of_differences runs the eight-lane path (the build targets it and the probe passed).
bool exp_lanes_in_use();

}  // namespace swa::golden::detail
