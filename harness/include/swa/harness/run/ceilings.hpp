#pragma once
// The ceilings a timing is quoted against, measured in the same run as the kernels.
#include <cstdint>

namespace swa::harness {

// Eigen's fp32 GEMM on an n^3 product, median after warm-ups, in GFLOP/s: the CPU's practical
// ceiling, measured in the same run as the kernels it is quoted against, on the Eigen the CPU DUT's
// chosen level runs (dut::cpu_sgemm_name() names it).
double sgemm_ceiling_gflops(int n, int warmups, int repeats);

// STREAM's triad a = b + s c over `elements` doubles per array, all threads, median after warm-ups,
// in GB/s counted as STREAM does (24 bytes per element: two reads, one write): the memory bandwidth
// a bandwidth-bound kernel (decode) is quoted against in the same run.
double triad_bandwidth_gbs(std::int64_t elements, int warmups, int repeats);

}  // namespace swa::harness
