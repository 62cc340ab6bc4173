#define BOOST_TEST_MODULE golden_kv_format
// The FP8 KV cache's semantics: the golden's codec against hand-derived codes and an independent
// nearest-value search, and the golden's attention with an FP8 format equal, bit for bit, to the
// golden on K/V quantised beforehand, in every mode and cache.
#include <boost/test/unit_test.hpp>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "problem.hpp"
#include "swa/kv_format.hpp"

using namespace swa;

namespace {

// Every finite non-negative value of the format, by code, from the OCP field layout.
std::vector<double> positive_values(KvFormat f) {
  const bool e4m3 = f == KvFormat::fp8_e4m3;
  const int m_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, largest = e4m3 ? 0x7e : 0x7b;
  std::vector<double> v;
  for (int c = 0; c <= largest; ++c) {
    const int e = c >> m_bits, m = c & ((1 << m_bits) - 1);
    v.push_back(e == 0 ? std::ldexp(m, 1 - bias - m_bits) : std::ldexp((1 << m_bits) + m, e - bias - m_bits));
  }
  return v;
}

// Nearest by search, ties to the even code, clamped to the largest: a reference apart from fp8_encode.
std::uint8_t nearest_code(KvFormat f, double x) {
  const std::vector<double> v = positive_values(f);
  const double a = std::min(std::fabs(x), v.back());
  int best = 0;
  for (int c = 1; c < static_cast<int>(v.size()); ++c) {
    const double dc = std::fabs(v[c] - a), db = std::fabs(v[best] - a);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  return static_cast<std::uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

}  // namespace

BOOST_AUTO_TEST_CASE(hand_derived_codes) {
  const KvFormat e4 = KvFormat::fp8_e4m3, e5 = KvFormat::fp8_e5m2;
  BOOST_TEST(fp8_encode(e4, 448.0) == 0x7e);
  BOOST_TEST(fp8_encode(e4, 464.0) == 0x7e);   // halfway to 480: ties to the even code, 448
  BOOST_TEST(fp8_encode(e4, 1e9) == 0x7e);     // saturates
  BOOST_TEST(fp8_encode(e4, -INFINITY) == 0xfe);
  BOOST_TEST(fp8_encode(e4, 1.0) == 0x38);     // exponent field 7, mantissa 0
  BOOST_TEST(fp8_encode(e4, 1.0625) == 0x38);  // halfway between 1 and 1.125: even
  BOOST_TEST(fp8_encode(e4, 1.1875) == 0x3a);  // halfway between 1.125 and 1.25: even (1.25)
  BOOST_TEST(fp8_encode(e4, std::ldexp(1.0, -9)) == 0x01);       // smallest subnormal
  BOOST_TEST(fp8_encode(e4, std::ldexp(1.0, -10)) == 0x00);      // halfway to 0: even
  BOOST_TEST(fp8_encode(e4, std::ldexp(3.0, -10)) == 0x02);      // 1.5 steps: even (2)
  BOOST_TEST(fp8_encode(e4, -0.0) == 0x80);
  BOOST_TEST(fp8_encode(e4, std::nan("")) == 0x7f);
  BOOST_TEST(std::isnan(fp8_decode(e4, 0x7f)));
  BOOST_TEST(std::isnan(fp8_decode(e4, 0xff)));
  BOOST_TEST(fp8_decode(e4, 0x7e) == 448.0);
  BOOST_TEST(fp8_decode(e4, 0x08) == std::ldexp(1.0, -6));  // smallest normal
  BOOST_TEST(fp8_encode(e5, 57344.0) == 0x7b);
  BOOST_TEST(fp8_encode(e5, 61440.0) == 0x7b);  // would round to 65536 (even): saturates
  BOOST_TEST(fp8_encode(e5, INFINITY) == 0x7b);
  BOOST_TEST(fp8_encode(e5, std::ldexp(1.0, -16)) == 0x01);
  BOOST_TEST(fp8_decode(e5, 0x7c) == INFINITY);
  BOOST_TEST(std::isnan(fp8_decode(e5, 0x7d)));
  BOOST_TEST(fp8_max(e4) == 448.0);
  BOOST_TEST(fp8_max(e5) == 57344.0);
  BOOST_TEST(kv_element_bytes(e4, DType::fp32) == 1u);
  BOOST_TEST(kv_element_bytes(KvFormat::dtype, DType::bf16) == 2u);
  for (KvFormat f : kAllKvFormats) BOOST_TEST((parse_kv_format(kv_format_name(f)) == f));
}

BOOST_AUTO_TEST_CASE(every_code_round_trips_and_encoding_matches_a_search) {
  for (KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2}) {
    int wrong = 0;
    for (int c = 0; c < 256; ++c) {
      const double v = fp8_decode(f, static_cast<std::uint8_t>(c));
      if (std::isfinite(v)) wrong += fp8_encode(f, v) != c;
    }
    BOOST_TEST(wrong == 0, kv_format_name(f) << ": codes that do not round-trip");
    // Every value, every midpoint and its neighbours either side, plus random values across the range.
    const std::vector<double> v = positive_values(f);
    std::vector<double> xs;
    for (std::size_t c = 0; c + 1 < v.size(); ++c) {
      const double mid = (v[c] + v[c + 1]) / 2;
      for (double x : {v[c], mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300)}) xs.push_back(x);
    }
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> exponent(-20, 18), mantissa(1, 2);
    for (int i = 0; i < 20000; ++i) xs.push_back(std::ldexp(mantissa(rng), static_cast<int>(exponent(rng))));
    // The whole double range: the saturation and underflow edges, subnormal doubles, infinity.
    std::uniform_int_distribution<std::uint64_t> any_bits(0, 0x7fefffffffffffff);
    for (int i = 0; i < 20000; ++i) xs.push_back(std::bit_cast<double>(any_bits(rng)));
    for (int e = -1074; e <= 1023; ++e)
      for (double m : {1.0, 1.5, 1.875, 1.9375, 1.99999}) xs.push_back(std::ldexp(m, e));
    for (double x : {0.0, std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max(), double{INFINITY}})
      xs.push_back(x);
    wrong = 0;
    for (double x : xs)
      for (double s : {1.0, -1.0}) wrong += fp8_encode(f, s * x) != nearest_code(f, s * x);
    BOOST_TEST(wrong == 0, kv_format_name(f) << ": encodings that differ from the nearest-value search");
  }
}

BOOST_AUTO_TEST_CASE(the_batch_read_is_the_one_value_read_rounded_to_float) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> value(0.f, 300.f);
  std::vector<float> xs(4096);
  for (float& x : xs) x = value(rng);
  xs[0] = NAN, xs[1] = -INFINITY, xs[2] = 1e-30f, xs[3] = -0.f;
  for (KvFormat f : kAllKvFormats)
    for (double descale : {1.0, 0.0078125, 1.0 / 4096}) {
      std::vector<float> batch = xs;
      kv_read_values(f, descale, batch.data(), batch.size());
      int wrong = 0;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const float one = static_cast<float>(kv_read_value(f, descale, xs[i]));
        wrong += std::bit_cast<std::uint32_t>(one) != std::bit_cast<std::uint32_t>(batch[i]);
      }
      BOOST_TEST(wrong == 0, kv_format_name(f) << " descale " << descale);
    }
}

BOOST_AUTO_TEST_CASE(attention_reads_the_quantised_values_in_every_mode_and_cache) {
  struct Schedule {
    RunMode mode;
    int chunk, steps;
  };
  for (KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2})
    for (DType dt : {DType::fp32, DType::bf16})
      for (Schedule s : {Schedule{RunMode::prefill, 0, 0}, Schedule{RunMode::chunked_prefill, 7, 0},
                         Schedule{RunMode::decode, 5, 9}})
        for (CachePolicy c : kAllCachePolicies) {
          test::Problem pr = test::make_problem({40, 23}, 4, 2, 16, {7, 0}, dt, 31, 2.0);
          AttnParams& p = pr.params;
          p.mode = s.mode, p.chunk = s.chunk, p.decode_steps = s.steps, p.cache = c;
          if (c == CachePolicy::paged && s.mode != RunMode::prefill) test::use_paged_cache(pr, 4, 5);
          p.kv_format = f;
          p.k_descale = f == KvFormat::fp8_e4m3 ? 0.0078125f : 1.f / 8192;  // e4m3: |k| > 3.5 saturates
          p.v_descale = f == KvFormat::fp8_e4m3 ? 0.015625f : 1.f / 4096;
          const golden::Output fp8 = golden::run(p);
          // The same problem with K/V quantised beforehand by the search reference, as fp32 inputs.
          std::vector<float> k(pr.k.size() / dtype_bytes(dt)), v(k.size());
          int saturated = 0;
          for (std::size_t i = 0; i < k.size(); ++i) {
            const double kx = load_from(dt, &pr.k[i * dtype_bytes(dt)]), vx = load_from(dt, &pr.v[i * dtype_bytes(dt)]);
            saturated += std::fabs(kx / p.k_descale) > fp8_max(f);
            k[i] = static_cast<float>(fp8_decode(f, nearest_code(f, kx / p.k_descale)) * p.k_descale);
            v[i] = static_cast<float>(fp8_decode(f, nearest_code(f, vx / p.v_descale)) * p.v_descale);
          }
          std::vector<float> q(pr.q.size() / dtype_bytes(dt));
          for (std::size_t i = 0; i < q.size(); ++i) q[i] = load_from(dt, &pr.q[i * dtype_bytes(dt)]);
          AttnParams ref = p;
          ref.kv_format = KvFormat::dtype;
          ref.dtype = DType::fp32;
          ref.q = q.data(), ref.k = k.data(), ref.v = v.data();
          const golden::Output want = golden::run(ref);
          BOOST_TEST((fp8.out == want.out), kv_format_name(f) << " " << dtype_name(dt) << " " << mode_name(s.mode)
                                                               << " " << cache_name(c));
          BOOST_TEST((fp8.lse == want.lse));
          if (f == KvFormat::fp8_e4m3) BOOST_TEST(saturated > 0, "the case must saturate some keys");
          // And the quantisation matters: the unquantised result is measurably elsewhere.
          AttnParams plain = p;
          plain.kv_format = KvFormat::dtype;
          BOOST_TEST(test::normwise_relative(golden::run(plain).out, fp8.out) > 1e-4);
        }
}
