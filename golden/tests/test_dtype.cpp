#define BOOST_TEST_MODULE golden_dtype
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <bit>
#include <cstdint>
#include <limits>
#include <cstring>
#include <vector>

#include "swa/dtype.hpp"

using swa::DType;
using swa::round_to;

BOOST_AUTO_TEST_CASE(fp16_range_edges) {
  BOOST_TEST(round_to(DType::fp16, 65504.f) == 65504.f);
  BOOST_TEST(round_to(DType::fp16, 65519.f) == 65504.f);   // below the midpoint to 65536
  BOOST_TEST(std::isinf(round_to(DType::fp16, 65520.f)));  // the midpoint rounds to even: inf
  BOOST_TEST(round_to(DType::fp16, -65520.f) == -std::numeric_limits<float>::infinity());
  BOOST_TEST(round_to(DType::fp16, -65536.f) == -std::numeric_limits<float>::infinity());  // ATB fp16 mask fill
}

BOOST_AUTO_TEST_CASE(fp16_round_to_nearest_even) {
  BOOST_TEST(round_to(DType::fp16, 1.f + 0x1p-11f) == 1.f);                   // tie -> even
  BOOST_TEST(round_to(DType::fp16, 1.f + 3 * 0x1p-11f) == 1.f + 0x1p-9f);     // tie -> even
  BOOST_TEST(round_to(DType::fp16, 1.f + 0x1p-11f + 0x1p-20f) == 1.f + 0x1p-10f);  // above tie
}

BOOST_AUTO_TEST_CASE(fp16_subnormals) {
  BOOST_TEST(round_to(DType::fp16, 0x1p-24f) == 0x1p-24f);       // smallest subnormal
  BOOST_TEST(round_to(DType::fp16, 0x1p-25f) == 0.f);            // tie between 0 and 2^-24 -> 0
  BOOST_TEST(round_to(DType::fp16, 3 * 0x1p-26f) == 0x1p-24f);
  BOOST_TEST(round_to(DType::fp16, 0x1p-14f - 0x1p-24f) == 0x1p-14f - 0x1p-24f);  // largest subnormal
}

BOOST_AUTO_TEST_CASE(bf16_rounding_and_range) {
  BOOST_TEST(round_to(DType::bf16, 1.f + 0x1p-8f) == 1.f);
  BOOST_TEST(round_to(DType::bf16, 1.f + 3 * 0x1p-8f) == 1.f + 0x1p-6f);
  BOOST_TEST(std::isinf(round_to(DType::bf16, std::numeric_limits<float>::max())));
  BOOST_TEST(round_to(DType::bf16, 0x1p-133f) == 0x1p-133f);  // bf16 subnormal
  BOOST_TEST(round_to(DType::bf16, 1e30f) != 1e30f);
  BOOST_TEST(std::isfinite(round_to(DType::bf16, 1e30f)));
}

BOOST_AUTO_TEST_CASE(specials_survive_every_dtype) {
  for (DType d : swa::kAllDTypes) {
    BOOST_TEST(std::isnan(round_to(d, std::numeric_limits<float>::quiet_NaN())));
    BOOST_TEST(round_to(d, std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
    BOOST_TEST(round_to(d, -std::numeric_limits<float>::infinity()) == -std::numeric_limits<float>::infinity());
    BOOST_TEST(std::signbit(round_to(d, -0.f)));
  }
}

BOOST_AUTO_TEST_CASE(store_load_round_trip) {
  const float values[] = {0.f, -1.5f, 3.140625f, 65504.f, 0x1p-24f, -0x1p-14f};
  for (DType d : swa::kAllDTypes)
    for (float x : values) {
      unsigned char buf[4];
      swa::store_as(d, x, buf);
      BOOST_TEST(swa::load_from(d, buf) == round_to(d, x));
    }
}

// The harness's metrics give it unrounded floats (harness/src/judge/metrics.cpp).
BOOST_AUTO_TEST_CASE(ulp_distance_rounds_both_values_to_the_dtype_first) {
  for (DType dt : {DType::fp16, DType::bf16, DType::fp32})
    for (int i = 0; i < 2000; ++i) {
      const float a = std::ldexp(1.f + 0.000731f * static_cast<float>(i), i % 40 - 20);
      const float b = -0.37f * a + std::ldexp(1.f, -(i % 30));
      BOOST_TEST(swa::ulp_distance(dt, a, b) == swa::ulp_distance(dt, swa::round_to(dt, a), swa::round_to(dt, b)));
    }
  BOOST_TEST(swa::ulp_distance(DType::fp16, 1.f + 0x1p-12f, 1.f + 0x1p-10f) == 1);
  BOOST_TEST(swa::ulp_distance(DType::fp16, 70000.f, 65504.f) == 1);  // beyond the range: inf
}

BOOST_AUTO_TEST_CASE(ulp_distance_counts_representable_steps) {
  BOOST_TEST(swa::ulp_distance(DType::fp16, 1.f, 1.f + 0x1p-10f) == 1);
  BOOST_TEST(swa::ulp_distance(DType::bf16, 1.f, 1.f + 0x1p-7f) == 1);
  BOOST_TEST(swa::ulp_distance(DType::fp32, 1.f, std::nextafter(1.f, 2.f)) == 1);
  BOOST_TEST(swa::ulp_distance(DType::fp16, 0.f, -0.f) == 0);
  BOOST_TEST(swa::ulp_distance(DType::fp16, 0x1p-24f, -0x1p-24f) == 2);
  BOOST_TEST(swa::ulp_distance(DType::fp16, 65504.f, 65472.f) == 1);
}

BOOST_AUTO_TEST_CASE(round_all_to_equals_round_to_on_every_value) {
  // Every 251st float bit pattern (all signs, exponents, NaNs and subnormals), and an odd count so
  // a vector loop's tail runs too: the batch rounding must give round_to's bits.
  std::vector<float> in;
  for (std::uint64_t bits = 0; bits <= 0xffffffffull; bits += 251) in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  in.push_back(65519.f);
  in.push_back(65520.f);
  for (DType dt : swa::kAllDTypes) {
    std::vector<float> got = in;
    swa::round_all_to(dt, got.data(), got.size());
    std::size_t wrong = 0;
    for (std::size_t j = 0; j < in.size(); ++j) {
      const float want = round_to(dt, in[j]);
      wrong += std::bit_cast<std::uint32_t>(want) != std::bit_cast<std::uint32_t>(got[j]);  // NaN payloads too
    }
    BOOST_TEST(wrong == 0u, swa::dtype_name(dt) << ": " << wrong << " of " << in.size());
  }
}

BOOST_AUTO_TEST_CASE(ulp_distances_equal_ulp_distance_on_every_pair) {
  // Every 4093rd float bit pattern (NaNs and infinities among them) against its neighbours 1, 7 and
  // 4099 patterns on, against its negation and sometimes a NaN; an odd count so a vector loop's tail
  // runs too.
  std::vector<float> a, b;
  // First, groups of eight finite pairs with one NaN on either side in each lane: a NaN payload that
  // the 16-bit rounding would carry into an infinity, and a negative quiet NaN.
  for (const std::uint32_t nan : {0x7f800001u, 0xffc00000u})
    for (int side = 0; side < 2; ++side)
      for (int lane = 0; lane < 8; ++lane)
        for (int i = 0; i < 8; ++i) {
          const float x = 0.75f + 0.125f * static_cast<float>(i), y = i == lane ? std::bit_cast<float>(nan) : -x;
          a.push_back(side == 0 ? y : x);
          b.push_back(side == 0 ? x : y);
        }
  for (std::uint64_t bits = 0; bits <= 0xffffffffull; bits += 4093) {
    const auto x = static_cast<std::uint32_t>(bits);
    for (std::uint32_t step : {1u, 7u, 4099u}) {
      a.push_back(std::bit_cast<float>(x));
      b.push_back(std::bit_cast<float>(x + step));
    }
    a.push_back(std::bit_cast<float>(x));
    b.push_back(-std::bit_cast<float>(x));
    if (bits % (4093 * 64) == 0) {
      a.push_back(std::numeric_limits<float>::quiet_NaN());
      b.push_back(std::bit_cast<float>(x));
    }
  }
  a.push_back(65519.f);
  b.push_back(65520.f);
  for (DType dt : swa::kAllDTypes) {
    std::vector<std::int64_t> got(a.size(), -1);
    swa::ulp_distances(dt, a.data(), b.data(), a.size(), got.data());
    std::size_t wrong = 0;
    for (std::size_t j = 0; j < a.size(); ++j) wrong += got[j] != swa::ulp_distance(dt, a[j], b[j]);
    BOOST_TEST(wrong == 0u, swa::dtype_name(dt) << ": " << wrong << " of " << a.size());
  }
}

BOOST_AUTO_TEST_CASE(store_all_as_and_load_all_from_give_the_one_element_bits) {
  // Every 16-bit pattern read back (NaN payloads among them), and floats around every rounding tie,
  // infinities, fp16 overflow and NaNs stored; odd counts and offsets so vector loops' tails run too.
  std::vector<float> floats;
  for (std::uint64_t bits = 0; bits <= 0xffffffffull; bits += 65521) {
    const auto x = static_cast<std::uint32_t>(bits);
    for (std::uint32_t near : {0u, 0x7fffu, 0x8000u, 0x8001u, 0xfffu, 0x1000u, 0x1001u})
      floats.push_back(std::bit_cast<float>((x & ~0xffffu) | near));
  }
  for (float x : {65519.f, 65520.f, -65520.f, INFINITY, -INFINITY, NAN, -NAN}) floats.push_back(x);
  for (DType dt : swa::kAllDTypes) {
    const std::size_t elem = swa::dtype_bytes(dt);
    std::vector<unsigned char> got(floats.size() * elem + 1), want(got.size());
    swa::store_all_as(dt, floats.data(), floats.size(), got.data() + 1);
    for (std::size_t i = 0; i < floats.size(); ++i) swa::store_as(dt, floats[i], want.data() + 1 + i * elem);
    BOOST_TEST((got == want), swa::dtype_name(dt) << ": store_all_as differs from store_as");

    std::vector<unsigned char> patterns(65537 * elem);
    for (std::size_t i = 0; i < 65537; ++i) {
      const auto bits = static_cast<std::uint32_t>(i * 65537u);  // fp32: patterns across the whole range
      std::memcpy(&patterns[i * elem], &bits, elem);
    }
    std::vector<float> loaded(65536);
    swa::load_all_from(dt, patterns.data() + elem, loaded.size(), loaded.data());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < loaded.size(); ++i)
      wrong += std::bit_cast<std::uint32_t>(loaded[i]) !=
               std::bit_cast<std::uint32_t>(swa::load_from(dt, &patterns[(i + 1) * elem]));
    BOOST_TEST(wrong == 0u, swa::dtype_name(dt) << ": load_all_from differs from load_from in " << wrong);
  }
}

BOOST_AUTO_TEST_CASE(names_parse_back) {
  for (DType d : swa::kAllDTypes) BOOST_TEST((swa::parse_dtype(swa::dtype_name(d)) == d));
  BOOST_TEST(!swa::parse_dtype("fp64").has_value());
  BOOST_TEST(swa::unit_roundoff(DType::fp16) == 0x1p-11);
}
