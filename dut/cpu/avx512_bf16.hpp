#pragma once
// The bf16 tile products of amx_bf16.hpp on AVX512-BF16 (VDPBF16PS: pairs of bf16 products summed
// into fp32 lanes), for CPUs without AMX where VDPBF16PS is fast (AMD Zen 4 and later). The same packed operands and the same
// contracts as amx::tile_scores and amx::add_weighted_values, which call these when AMX is not usable.
// Numerics as AMX's: exact products, fp32 sums, subnormal inputs and sums flushed to zero by the
// instruction; only the order of the sums differs.
#include <cstdint>

#include "amx_bf16.hpp"

namespace swa::dut::cpu::avx512_bf16 {

// The CPU has AVX512F and AVX512_BF16 and the OS saves the ZMM state.
bool cpu_supports();

// Whether VDPBF16PS (64 flops an instruction) outruns the fp32 FMA (32) on this CPU, so that these
// products beat the fp32 GEMMs. On AMD, yes: a 2-core Zen 5 (EPYC, family 26) issued both at
// 8.2-8.4 G instructions/s per core (one thread, 24 accumulators: 526-539 against 260-268 GFLOP/s),
// and swa-bench's bf16 prefill took 214-215 ms on these products against 404-412 ms on the fp32
// GEMMs (1.62-1.80x against 0.85-0.86x the same run's SGEMM). On Intel's AVX512-BF16 CPUs without usable AMX (Sapphire/Emerald
// Rapids where the hypervisor hides AMX) a 2-core Xeon issued 0.5 VDPBF16PS a cycle against 2 FMAs
// (87 against 178 GFLOP/s in one process), and bf16 prefill took 950 ms on these products against
// 646 ms on the fp32 GEMMs: no.
bool beats_fp32_fma();

void tile_scores(const amx::PackedQueries& q, const amx::PackedKeys& keys, std::int64_t first_block,
                 std::int64_t block_count, float* scores);

// out += P x V, P already packed as bf16 ([rows padded to 8][cols]).
void add_weighted_values(const std::uint16_t* p, std::int64_t rows, std::int64_t cols, const amx::PackedKeys& keys,
                         std::int64_t first_block, float* out);

}  // namespace swa::dut::cpu::avx512_bf16
