#pragma once
// Timing and FLOP counting, one path for `swa-bench` and `run --perf`: warm-ups, then the median of
// repeated runs (the machines are shared and noisy), and FLOPs counted exactly. The same-run SGEMM
// and triad ceilings that ratios are quoted against are run/ceilings.hpp's.
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

}  // namespace swa::harness
