#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "swa/params.hpp"
#include "swa/harness/run/perf.hpp"
#include "swa/harness/base/timing.hpp"

namespace swa::bench {

using harness::attention_gflops;
using harness::host_ms;
using harness::time_median;
using harness::time_reported;
using harness::PerfRow;
using harness::Timing;

struct BenchSettings {
  int warmups = 1;
  int repeats = 5;
};



// Positions per page of the paged decode benchmarks (vLLM's default block size).
inline constexpr int kBenchPageSize = 16;

struct Shape {
  std::int64_t s, w;  // w = 0: full causal
  int d, hq, hkv, batch;
};

// s in single quotes for /bin/sh.
std::string shell_quote(const std::string& s);

// A row with the case's name and shape filled in; the caller times it.
PerfRow row_for(const std::string& case_name, const std::string& dut, DType dtype, const Shape& shape,
                std::string_view mode, std::string_view cache);

// Prefill of `batch` sequences of s tokens; dut "dense-masked" is the naive S x S implementation.
PerfRow bench_prefill(const std::string& case_name, const std::string& dut, DType dtype, Shape shape,
                       const BenchSettings& settings);

// One decode step per sequence at `context` tokens already cached (s = context).
PerfRow bench_decode(const std::string& case_name, const std::string& dut, DType dtype, Shape shape,
                      CachePolicy cache, const BenchSettings& settings);

}  // namespace swa::bench
