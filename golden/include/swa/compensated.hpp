#pragma once

namespace swa {

// Error-free transformation (Knuth's TwoSum): s + e == a + b exactly. Branch-free, so lanes of it
// vectorise. Accumulating the e terms gives compensated summation with Neumaier's bound:
// |error| <= 2u|sum| + O(n u^2) sum|x_i|.
// Requires strict IEEE evaluation: never compile with -ffast-math / -fassociative-math.
struct CompensatedSum {
  double sum = 0.0;
  double err = 0.0;

  void add(double x) {
    const double s = sum + x;
    const double z = s - sum;
    err += (sum - (s - z)) + (x - z);
    sum = s;
  }
  double value() const { return sum + err; }
};

}  // namespace swa
