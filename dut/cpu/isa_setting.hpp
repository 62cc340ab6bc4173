#pragma once
// SWA_CPU_ISA: the environment variable that steers the CPU DUT's run-time instruction choices
// (dut/README.md), read in one place with its allowed values, so a misspelt value is refused
// instead of silently leaving the default path.
#include <optional>
#include <string>
#include <string_view>

namespace swa::dut::cpu {

// Each value, and what it does; unset means the best path the CPU has.
inline constexpr std::string_view kIsaSettings[] = {
    "portable",          // the x86-64 (SSE2) kernels, portable C++ conversion, no fused decode or bf16 products
    "x86-64-v3",         // as on an AVX2 CPU: the x86-64-v3 kernels, AVX2 decode, no AVX-512 or AMX products
    "no-amx",            // bf16 prefill products: skip AMX
    "avx512-bf16",       // bf16 prefill products: AVX512-BF16 wherever the CPU has it
    "no-bf16-products",  // bf16 prefill: conversion, then the fp32 GEMMs
    "avx2-decode",       // fp16/bf16 decode: the AVX2 kernels even where AVX-512 is there
};

// SWA_CPU_ISA == value.
bool isa_setting_is(std::string_view value);

// Whether the CPU has F16C (from CPUID: clang 14's __builtin_cpu_supports does not know "f16c").
bool cpu_has_f16c();

// Why SWA_CPU_ISA's value is refused (naming the variable and the allowed values), or nothing when it
// is unset, empty or allowed.
std::optional<std::string> isa_setting_error();

}  // namespace swa::dut::cpu
