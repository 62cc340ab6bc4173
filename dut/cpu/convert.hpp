#pragma once
// fp16 and bf16 storage to fp32 with the best conversion instructions this CPU has, chosen at run
// time (F16C + AVX2 on x86-64 when present, portable C++ otherwise), so one binary runs on every
// x86-64 machine. The conversions are exact; `scale` multiplies after (1 = exact copy).
#include <cstdint>
#include <string_view>

namespace swa::dut::cpu {

void fp16_to_fp32(const std::uint16_t* src, float* dst, std::int64_t n, float scale);
void bf16_to_fp32(const std::uint16_t* src, float* dst, std::int64_t n, float scale);

// FP8 KV codes (e4m3 or e5m2) to fp32 times `descale`, through a 256-entry table of fp8.hpp's decode.
void fp8_to_fp32(const std::uint8_t* src, float* dst, std::int64_t n, bool e4m3, float descale);
// x -> fp8(x / descale) * descale in place: what a kernel that writes K/V to an FP8 cache reads back.
void fp8_round_trip(float* x, std::int64_t n, bool e4m3, float descale);

// Which conversion path this process uses: "avx2+f16c" or "portable" (also forced by the environment
// variable SWA_CPU_ISA=portable).
std::string_view conversion_path();

}  // namespace swa::dut::cpu
