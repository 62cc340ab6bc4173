#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so element i of any tensor is a pure function of (seed, stream, i)
// and every process, on any device, rebuilds the same inputs bit for bit.
#include <array>
#include <cstdint>

namespace swa::harness {

using PhiloxBlock = std::array<std::uint32_t, 4>;

inline constexpr std::uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;

constexpr PhiloxBlock philox4x32_10(PhiloxBlock counter, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kMul0 = kPhiloxMul0, kMul1 = kPhiloxMul1, kWeyl0 = kPhiloxWeyl0, kWeyl1 = kPhiloxWeyl1;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * counter[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * counter[2];
    counter = {static_cast<std::uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<std::uint32_t>(p1),
               static_cast<std::uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    key = {key[0] + kWeyl0, key[1] + kWeyl1};
  }
  return counter;
}

// philox4x32_10 of kLanes consecutive counters {first + i (64 bits over words 0 and 1), word2, word3}
// at once, as a structure of arrays so the compiler vectorises the rounds. out[w][i] is word w of
// counter i: the same bits as philox4x32_10 (tests/test_inputs.cpp checks).
template <int kLanes>
void philox4x32_10_lanes(std::uint64_t first, std::uint32_t word2, std::uint32_t word3, std::array<std::uint32_t, 2> key,
                         std::uint32_t (&out)[4][kLanes]) {
  constexpr std::uint32_t kMul0 = kPhiloxMul0, kMul1 = kPhiloxMul1, kWeyl0 = kPhiloxWeyl0, kWeyl1 = kPhiloxWeyl1;
  std::uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int i = 0; i < kLanes; ++i) {
    const std::uint64_t index = first + static_cast<std::uint64_t>(i);
    c0[i] = static_cast<std::uint32_t>(index);
    c1[i] = static_cast<std::uint32_t>(index >> 32);
    c2[i] = word2;
    c3[i] = word3;
  }
  std::uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < kLanes; ++i) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c0[i];
      const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c2[i];
      const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[i] ^ k0;
      const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[i] ^ k1;
      c1[i] = static_cast<std::uint32_t>(p1);
      c3[i] = static_cast<std::uint32_t>(p0);
      c0[i] = n0;
      c2[i] = n2;
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int i = 0; i < kLanes; ++i) {
    out[0][i] = c0[i];
    out[1][i] = c1[i];
    out[2][i] = c2[i];
    out[3][i] = c3[i];
  }
}

// Uniform in (0, 1): 32 random bits, never exactly 0 or 1.
constexpr double philox_uniform(std::uint32_t bits) { return (static_cast<double>(bits) + 0.5) * 0x1p-32; }

}  // namespace swa::harness
