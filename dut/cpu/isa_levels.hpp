#pragma once
// The CPU DUT's kernels that lean on Eigen's compile-time SIMD (cpu_dut.cpp, flash_tile.cpp) are
// compiled once per x86-64 level (x86-64, x86-64-v3 = AVX2+FMA+F16C, x86-64-v4 = AVX-512), each
// into one object whose symbols are local to it but for its entry points (dut/cpu/CMakeLists.txt,
// localize_level.cmake), and the best level this CPU runs is chosen at run time, as PyTorch's
// CPU_CAPABILITY kernels are. So one binary built without -march=native runs on any x86-64 CPU and
// still gets AVX-512 GEMMs where the CPU has them. Off x86-64 there is one level, "native".
#include <memory>
#include <string>

#include "swa/dut/cpu_dut.hpp"

// A level's entry points, C names so that localize_level.cmake can keep them global by pattern.
#define SWA_CPU_LEVEL_ENTRY_NAME2(level, what) swa_cpu_level_##level##_##what
#define SWA_CPU_LEVEL_ENTRY_NAME(level, what) SWA_CPU_LEVEL_ENTRY_NAME2(level, what)
#define SWA_CPU_DECLARE_LEVEL_ENTRIES(level)                                                         \
  extern "C" swa::dut::Dut* SWA_CPU_LEVEL_ENTRY_NAME(level, make_dut)(const swa::dut::CpuTuning* tuning); \
  extern "C" const char* SWA_CPU_LEVEL_ENTRY_NAME(level, gemm_simd)();                              \
  extern "C" void SWA_CPU_LEVEL_ENTRY_NAME(level, sgemm)(int n, const float* a, const float* b, float* c);

namespace swa::dut::cpu {

enum class IsaLevel { x86_64, x86_64_v3, x86_64_v4, native };

// The best level this CPU and OS run (x86-64-v4 needs the OS to save the ZMM state), capped by
// SWA_CPU_ISA: `portable` takes x86-64, `x86-64-v3` at most x86-64-v3. Chosen once per process.
IsaLevel chosen_level();

// Whether this CPU and OS run the level (whatever SWA_CPU_ISA says).
bool cpu_runs(IsaLevel level);

// "x86-64-v4", ...
const char* level_name(IsaLevel level);

// The SIMD set Eigen was compiled for in that level ("avx512f", "avx2+fma", "sse2", ...); the CPU
// must run the level (cpu_runs), as for the two below.
const char* level_gemm_simd(IsaLevel level);

// The CPU DUT on that level's kernels; the level must be one the CPU runs (cpu_runs).
std::unique_ptr<Dut> make_level_dut(IsaLevel level, CpuTuning tuning);

// C = A B, n x n column-major fp32, on that level's Eigen GEMM.
void level_sgemm(IsaLevel level, int n, const float* a, const float* b, float* c);

}  // namespace swa::dut::cpu
