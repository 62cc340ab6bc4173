#pragma once
// Warm-ups, then the median of repeated runs: the machines are shared and noisy.
#include <algorithm>
#include <chrono>
#include <vector>

namespace swa::bench {

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

}  // namespace swa::bench
