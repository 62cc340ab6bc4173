#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "swa/params.hpp"
#include "swa/harness/timing.hpp"

namespace swa::bench {

using harness::attention_gflops;
using harness::host_ms;
using harness::time_median;
using harness::time_reported;
using harness::Timing;

struct BenchSettings {
  int warmups = 1;
  int repeats = 5;
};

struct BenchRow {
  std::string case_name, dut, dtype, mode, cache;
  std::int64_t s = 0, w = 0, d = 0, hq = 0, hkv = 0, batch = 1;
  Timing timing;
  double gflops = 0;        // 4 * D * attended pairs * Hq / time
  double sgemm_gflops = 0;  // the same run's ceiling
  std::int64_t kv_bytes = 0;
  std::string timer = "host wall clock";  // or "device events": a device DUT's kernels alone
  double ratio_to_sgemm() const { return sgemm_gflops > 0 ? gflops / sgemm_gflops : 0; }
};


struct Shape {
  std::int64_t s, w;  // w = 0: full causal
  int d, hq, hkv, batch;
};

// Prefill of `batch` sequences of s tokens; dut "dense-masked" is the naive S x S implementation.
BenchRow bench_prefill(const std::string& case_name, const std::string& dut, DType dtype, Shape shape,
                       const BenchSettings& settings);

// One decode step per sequence at `context` tokens already cached (s = context).
BenchRow bench_decode(const std::string& case_name, const std::string& dut, DType dtype, Shape shape,
                      CachePolicy cache, const BenchSettings& settings);

}  // namespace swa::bench
