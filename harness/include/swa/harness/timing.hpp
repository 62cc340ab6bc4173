#pragma once
// Timing and FLOP counting, one path for `swa-bench` and `run --perf`: warm-ups, then the median of
// repeated runs (the machines are shared and noisy), FLOPs counted exactly, and the same-run SGEMM
// ceiling that ratios are quoted against.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace swa::harness {

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int repeats = 0;
};

// `measure` runs once and returns the milliseconds it took by whatever clock fits the work.
template <class F>
Timing time_reported(F&& measure, int warmups, int repeats) {
  for (int i = 0; i < warmups; ++i) measure();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) ms.push_back(measure());
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back(), repeats};
}

template <class F>
double host_ms(F&& run) {
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

template <class F>
Timing time_median(F&& run, int warmups, int repeats) {
  return time_reported([&] { return host_ms(run); }, warmups, repeats);
}

// Attention FLOPs are 4 * D * (attended query-key pairs) * Hq: QK^T and PV, a multiply-add each.
inline double attention_gflops(std::int64_t head_size, std::int64_t pairs, std::int64_t heads_q, double ms) {
  return 4.0 * static_cast<double>(head_size) * static_cast<double>(pairs) * static_cast<double>(heads_q) / (ms * 1e6);
}

// Eigen's fp32 GEMM on an n^3 product, median after warm-ups, in GFLOP/s: the CPU's practical
// ceiling, measured in the same run as the kernels it is quoted against, on the Eigen the CPU DUT's
// chosen level runs (dut::cpu_sgemm_name() names it).
double sgemm_ceiling_gflops(int n, int warmups, int repeats);

// STREAM's triad a = b + s c over `elements` doubles per array, all threads, median after warm-ups,
// in GB/s counted as STREAM does (24 bytes per element: two reads, one write): the memory bandwidth
// a bandwidth-bound kernel (decode) is quoted against in the same run.
double triad_bandwidth_gbs(std::int64_t elements, int warmups, int repeats);

}  // namespace swa::harness
