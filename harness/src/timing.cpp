#include "swa/harness/timing.hpp"

#include <Eigen/Core>

namespace swa::harness {

double sgemm_ceiling_gflops(int n, int warmups, int repeats) {
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  const Timing t = time_median([&] { c.noalias() = a * b; }, warmups, repeats);
  return 2.0 * n * n * static_cast<double>(n) / (t.median_ms * 1e6);
}

}  // namespace swa::harness
