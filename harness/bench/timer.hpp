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

template <class F>
Timing time_median(F&& run, int warmups, int repeats) {
  for (int i = 0; i < warmups; ++i) run();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back(), repeats};
}

}  // namespace swa::bench
