#include "fused_kv.hpp"

#include <cstdlib>

#include "fused_kv_kernels.hpp"
#include "isa_setting.hpp"

namespace swa::dut::cpu::fused {
namespace {

enum class Path { none, avx2, avx512 };

Path chosen_path() {
#if defined(__x86_64__)
  static const Path path = [] {
    if (isa_setting_is("portable")) return Path::none;
    if (!__builtin_cpu_supports("avx2") || !cpu_has_f16c() || !__builtin_cpu_supports("fma"))
      return Path::none;
    if (!isa_setting_is("avx2-decode") && !isa_setting_is("x86-64-v3") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
      return Path::avx512;
    return Path::avx2;
  }();
  return path;
#else
  return Path::none;
#endif
}

}  // namespace

bool available() { return chosen_path() != Path::none; }

const char* path_name() {
  switch (chosen_path()) {
    case Path::avx512: return "fused avx512f+bw+vl";
    case Path::avx2: return "fused avx2+f16c+fma";
    case Path::none: break;
  }
  return "converted, then GEMM";
}

void dots(const float* q, int group, int d, const std::uint16_t* k, std::int64_t stride, std::int64_t n, bool bf16,
          float* scores, std::int64_t ld, Prefetch ahead) {
#if defined(__x86_64__)
  switch (chosen_path()) {
    case Path::avx512: return avx512::dots(q, group, d, k, stride, n, bf16, scores, ld, ahead);
    case Path::avx2: return avx2::dots(q, group, d, k, stride, n, bf16, scores, ld, ahead);
    case Path::none: break;
  }
#endif
  std::abort();  // callers check available()
}

void accumulate(const float* p, std::int64_t ld, int group, const std::uint16_t* v, std::int64_t stride,
                std::int64_t n, int d, bool bf16, float* out, Prefetch ahead) {
#if defined(__x86_64__)
  switch (chosen_path()) {
    case Path::avx512: return avx512::accumulate(p, ld, group, v, stride, n, d, bf16, out, ahead);
    case Path::avx2: return avx2::accumulate(p, ld, group, v, stride, n, d, bf16, out, ahead);
    case Path::none: break;
  }
#endif
  std::abort();
}

}  // namespace swa::dut::cpu::fused
