#include "swa/harness/run/ceilings.hpp"
#include "swa/harness/base/timing.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include <Eigen/Core>

#include "swa/dut/cpu_dut.hpp"

namespace swa::harness {

double sgemm_ceiling_gflops(int n, int warmups, int repeats) {
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  const Timing t = time_median([&] { dut::cpu_sgemm(n, a.data(), b.data(), c.data()); }, warmups, repeats);
  // Spot checks, not a second GEMM (which a portable build would run on SSE2): 16 elements against
  // fp64 dot products, within fp32's rounding of the sum of |a_ik b_kj|.
  for (int s = 0; s < 16; ++s) {
    const int i = (s * 131) % n, j = (s * 197 + 7) % n;
    double exact = 0, scale = 0;
    for (int k = 0; k < n; ++k) {
      exact += static_cast<double>(a(i, k)) * b(k, j);
      scale += std::abs(static_cast<double>(a(i, k)) * b(k, j));
    }
    if (!(std::abs(c(i, j) - exact) <= 1e-4 * scale)) throw std::logic_error("SGEMM computed a wrong product");
  }
  return 2.0 * n * n * static_cast<double>(n) / (t.median_ms * 1e6);
}

double triad_bandwidth_gbs(std::int64_t elements, int warmups, int repeats) {
  std::vector<double> a(static_cast<std::size_t>(elements)), b(a.size()), c(a.size());
  const double s = 3.0;
  // First touch in the same parallel layout as the timed loop, so pages sit near the threads that use them.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < elements; ++i) {
    a[i] = 0.0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
  const Timing t = time_median(
      [&] {
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < elements; ++i) a[i] = b[i] + s * c[i];
      },
      warmups, repeats);
  if (a[elements / 2] != 7.0) throw std::logic_error("STREAM triad computed a wrong value");
  return 3.0 * sizeof(double) * static_cast<double>(elements) / (t.median_ms * 1e6);
}

}  // namespace swa::harness
