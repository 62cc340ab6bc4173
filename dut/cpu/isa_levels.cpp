#include "isa_levels.hpp"

#include <stdexcept>

#include "amx_bf16.hpp"
#include "convert.hpp"
#include "fused_kv.hpp"
#include "isa_setting.hpp"

#if defined(SWA_CPU_X86_64_LEVELS)
SWA_CPU_DECLARE_LEVEL_ENTRIES(x86_64)
SWA_CPU_DECLARE_LEVEL_ENTRIES(x86_64_v3)
SWA_CPU_DECLARE_LEVEL_ENTRIES(x86_64_v4)
#else
SWA_CPU_DECLARE_LEVEL_ENTRIES(native)
#endif

namespace swa::dut::cpu {
namespace {

IsaLevel best_level() {
#if defined(SWA_CPU_X86_64_LEVELS)
  if (isa_setting_is("portable")) return IsaLevel::x86_64;
  if (cpu_runs(IsaLevel::x86_64_v4) && !isa_setting_is("x86-64-v3")) return IsaLevel::x86_64_v4;
  if (cpu_runs(IsaLevel::x86_64_v3)) return IsaLevel::x86_64_v3;
  return IsaLevel::x86_64;
#else
  return IsaLevel::native;
#endif
}

}  // namespace

bool cpu_runs(IsaLevel level) {
  switch (level) {
#if defined(SWA_CPU_X86_64_LEVELS)
    // GCC's x86-64-vN checks include the OS's XSAVE support of the YMM / ZMM state.
    case IsaLevel::x86_64: return true;
#if defined(__clang__) && __clang_major__ < 16
    // Clang before 16 knows neither level name: their features one by one (each AVX one checked
    // against the OS's XSAVE state by the runtime, as GCC's level checks are).
    case IsaLevel::x86_64_v3:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
             __builtin_cpu_supports("fma") && cpu_has_f16c();
    case IsaLevel::x86_64_v4:
      return cpu_runs(IsaLevel::x86_64_v3) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
    case IsaLevel::x86_64_v3: return __builtin_cpu_supports("x86-64-v3");
    case IsaLevel::x86_64_v4: return __builtin_cpu_supports("x86-64-v4");
#endif
#else
    case IsaLevel::native: return true;
#endif
    default: break;
  }
  return false;
}

IsaLevel chosen_level() {
  static const IsaLevel level = best_level();
  return level;
}

const char* level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::x86_64: return "x86-64";
    case IsaLevel::x86_64_v3: return "x86-64-v3";
    case IsaLevel::x86_64_v4: return "x86-64-v4";
    case IsaLevel::native: break;
  }
  return "native";
}

namespace {

// One level's entry points (SWA_CPU_DECLARE_LEVEL_ENTRIES).
struct LevelEntries {
  Dut* (*make_dut)(const CpuTuning*);
  const char* (*gemm_simd)();
  void (*sgemm)(int, const float*, const float*, float*);
};

#define SWA_CPU_LEVEL_ENTRIES(level)                                                                    \
  LevelEntries {                                                                                        \
    SWA_CPU_LEVEL_ENTRY_NAME(level, make_dut), SWA_CPU_LEVEL_ENTRY_NAME(level, gemm_simd),              \
        SWA_CPU_LEVEL_ENTRY_NAME(level, sgemm)                                                          \
  }

// The level's entry points; the CPU must run it.
const LevelEntries& entries_to_run(IsaLevel level) {
  if (!cpu_runs(level)) throw std::logic_error(std::string("CPU kernels: this CPU does not run level ") + level_name(level));
#if defined(SWA_CPU_X86_64_LEVELS)
  static const LevelEntries x86_64 = SWA_CPU_LEVEL_ENTRIES(x86_64), v3 = SWA_CPU_LEVEL_ENTRIES(x86_64_v3),
                            v4 = SWA_CPU_LEVEL_ENTRIES(x86_64_v4);
  if (level == IsaLevel::x86_64_v4) return v4;
  if (level == IsaLevel::x86_64_v3) return v3;
  return x86_64;
#else
  static const LevelEntries native = SWA_CPU_LEVEL_ENTRIES(native);
  return native;
#endif
}

}  // namespace

const char* level_gemm_simd(IsaLevel level) { return entries_to_run(level).gemm_simd(); }

std::unique_ptr<Dut> make_level_dut(IsaLevel level, CpuTuning tuning) {
  return std::unique_ptr<Dut>(entries_to_run(level).make_dut(&tuning));
}

void level_sgemm(IsaLevel level, int n, const float* a, const float* b, float* c) {
  entries_to_run(level).sgemm(n, a, b, c);
}

}  // namespace swa::dut::cpu

namespace swa::dut {

std::unique_ptr<Dut> make_cpu_dut(CpuTuning tuning) { return cpu::make_level_dut(cpu::chosen_level(), tuning); }

void cpu_sgemm(int n, const float* a, const float* b, float* c) { cpu::level_sgemm(cpu::chosen_level(), n, a, b, c); }

std::string cpu_sgemm_name() {
  const cpu::IsaLevel level = cpu::chosen_level();
  return std::string("Eigen, ") + cpu::level_name(level) + " " + cpu::level_gemm_simd(level);
}

std::optional<std::string> cpu_isa_setting_error() { return cpu::isa_setting_error(); }

std::string cpu_kernel_path() {
  const cpu::IsaLevel level = cpu::chosen_level();
  return std::string("GEMM (Eigen, run time): ") + cpu::level_name(level) + " kernels, " + cpu::level_gemm_simd(level) +
         "; fp16/bf16 conversion (run time): " + std::string(cpu::conversion_path()) +
         "; fp16/bf16 decode (run time): " + cpu::fused::path_name() +
         "; bf16 prefill products (run time): " + cpu::amx::products_name();
}

}  // namespace swa::dut
