#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so element i of any tensor is a pure function of (seed, stream, i)
// and every process, on any device, rebuilds the same inputs bit for bit.
#include <array>
#include <cstdint>

namespace swa::harness {

using PhiloxBlock = std::array<std::uint32_t, 4>;

constexpr PhiloxBlock philox4x32_10(PhiloxBlock counter, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * counter[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * counter[2];
    counter = {static_cast<std::uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<std::uint32_t>(p1),
               static_cast<std::uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    key = {key[0] + kWeyl0, key[1] + kWeyl1};
  }
  return counter;
}

// Uniform in (0, 1): 32 random bits, never exactly 0 or 1.
constexpr double philox_uniform(std::uint32_t bits) { return (static_cast<double>(bits) + 0.5) * 0x1p-32; }

}  // namespace swa::harness
