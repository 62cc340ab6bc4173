#define BOOST_TEST_MODULE dut_cpu
#include <omp.h>

#include <boost/test/unit_test.hpp>

#include <Eigen/Core>
#include <cmath>
#include <cstdlib>

#include "amx_bf16.hpp"
#include "bf16_weights.hpp"
#include "convert.hpp"
#include "swa/dut/cpu_dut.hpp"
#include "fused_kv.hpp"
#include "isa_setting.hpp"
#include "isa_levels.hpp"
#include "dut_case.hpp"
#include "swa/atb_masks.hpp"
#include "swa/dut/fp8.hpp"

using namespace swa;
using namespace swa::dut;
using test::Case;
using test::make_case;
using test::masked_case;

namespace {

std::string cpu_verdict(Case& c, CpuTuning tuning = {}) {
  auto dut = make_cpu_dut(tuning);
  return test::verdict(*dut, c);
}

double cpu_error(Case& c) {
  auto dut = make_cpu_dut();
  return test::relative_error(*dut, c);
}

}  // namespace

BOOST_AUTO_TEST_CASE(prefill_every_head_size_and_dtype) {
  for (int d : {40, 64, 72, 80, 96, 128, 160, 192, 256})
    for (DType dt : kAllDTypes)
      for (std::int64_t w : {1, 17, 100}) {
        Case c = make_case({130, 1, 67}, 4, 2, d, w, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
        BOOST_TEST(cpu_verdict(c) == "pass", "D=" << d << " " << dtype_name(dt) << " W=" << w);
      }
}

BOOST_AUTO_TEST_CASE(chunked_prefill_and_decode_through_every_cache) {
  for (CachePolicy cache : kAllCachePolicies)
    for (DType dt : {DType::fp32, DType::bf16}) {
      Case c_gt_w = make_case({150, 1, 70}, 8, 2, 64, 20, RunMode::chunked_prefill, cache, 33, 0, dt);  // C > W
      BOOST_TEST(cpu_verdict(c_gt_w) == "pass", cache_name(cache) << " C>W " << dtype_name(dt));
      Case c_lt_w = make_case({150, 9}, 8, 2, 64, 20, RunMode::chunked_prefill, cache, 7, 0, dt);  // wraps inside chunks
      BOOST_TEST(cpu_verdict(c_lt_w) == "pass", cache_name(cache) << " C<W " << dtype_name(dt));
      Case c_eq_w = make_case({80}, 4, 4, 72, 20, RunMode::chunked_prefill, cache, 20, 0, dt);  // wrap at chunk boundary
      BOOST_TEST(cpu_verdict(c_eq_w) == "pass", cache_name(cache) << " C=W " << dtype_name(dt));
      Case dec = make_case({60, 30, 27}, 8, 2, 128, 16, RunMode::decode, cache, 9, 25, dt);  // prompts 35, 5, 2
      BOOST_TEST(cpu_verdict(dec) == "pass", cache_name(cache) << " decode " << dtype_name(dt));
    }
}

BOOST_AUTO_TEST_CASE(decode_over_many_key_tiles_and_splits) {
  // Caches of several decode tiles (256 keys) split across threads, rings partly and wholly filled,
  // a linear window that starts mid-tile, and sequences of different lengths in one step.
  for (CachePolicy cache : kAllCachePolicies)
    for (DType dt : kAllDTypes)
      for (std::int64_t w : {300, 700}) {
        Case c = make_case({760, 40, 530}, 8, 2, 64, w, RunMode::decode, cache, 97, 6, dt);
        BOOST_TEST(cpu_verdict(c) == "pass", cache_name(cache) << " " << dtype_name(dt) << " W=" << w);
      }
}

BOOST_AUTO_TEST_CASE(decode_in_place_every_head_size_and_group) {
  // The fused fp16/bf16 decode tiles with head sizes off the kernels' 16- and 64-lane steps and GQA
  // groups of 1, 4 and 5 query rows (a 4-row pass and a 1-row remainder), over several 128-slot tiles.
  struct Heads {
    int q, kv;
  };
  for (CachePolicy cache : kAllCachePolicies)
    for (DType dt : {DType::fp16, DType::bf16})
      for (int d : {13, 72, 136})
        for (Heads h : {Heads{3, 3}, Heads{8, 2}, Heads{10, 2}}) {
          Case c = make_case({420, 290}, h.q, h.kv, d, 300, RunMode::decode, cache, 71, 4, dt);
          BOOST_TEST(cpu_verdict(c) == "pass",
                     cache_name(cache) << " " << dtype_name(dt) << " D=" << d << " Hq=" << h.q << " Hkv=" << h.kv);
        }
}

BOOST_AUTO_TEST_CASE(fp16_and_bf16_conversion_is_exact_for_every_bit_pattern) {
  // Whichever path this process chose (the test runs again under SWA_CPU_ISA=portable), against
  // Eigen's scalar conversions; odd lengths reach the vector loops' tails.
  BOOST_TEST_MESSAGE("conversion path: " << cpu::conversion_path());
  std::vector<std::uint16_t> bits(65536 + 5);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  std::vector<float> got(bits.size());
  for (float scale : {1.f, 0.125f}) {
    cpu::fp16_to_fp32(bits.data(), got.data(), static_cast<std::int64_t>(bits.size()), scale);
    int wrong = 0;
    for (std::size_t i = 0; i < bits.size(); ++i) {
      const float want = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits[i])) * scale;
      wrong += !(want == got[i] || (std::isnan(want) && std::isnan(got[i])));
    }
    BOOST_TEST(wrong == 0, "fp16, scale " << scale);
    cpu::bf16_to_fp32(bits.data(), got.data(), static_cast<std::int64_t>(bits.size()), scale);
    wrong = 0;
    for (std::size_t i = 0; i < bits.size(); ++i) {
      const float want = static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits[i])) * scale;
      wrong += !(want == got[i] || (std::isnan(want) && std::isnan(got[i])));
    }
    BOOST_TEST(wrong == 0, "bf16, scale " << scale);
  }
}

BOOST_AUTO_TEST_CASE(fused_dots_and_accumulate_match_an_fp64_loop) {
  // decode's in-place fp16/bf16 kernels on their own (the path this process chose: AVX-512, or AVX2
  // under SWA_CPU_ISA=avx2-decode, dut_cpu_avx2_decode_test), against fp64 sums of the same converted
  // values: 1..5 query rows (the 4-row blocks and their remainder); key counts below one 4-key pass,
  // past one 8-row block, with a remainder; head sizes with a 16- or 8-lane tail (13, 40, 72, 136)
  // or none (96: a 64-column pass and two 16-column chunks; 128 and 256: whole 64-column passes, the
  // AVX-512 kernels' unmasked paths); rows strided as in a cache of 3 kv heads; a prefetch range as
  // decode passes one.
  if (!cpu::fused::available()) {
    BOOST_TEST_MESSAGE("skipped: no AVX2+F16C+FMA (or SWA_CPU_ISA=portable)");
    return;
  }
  BOOST_TEST_MESSAGE("fused decode path: " << cpu::fused::path_name());
  std::uint32_t state = 12345;
  auto uniform = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.f - 0.5f;
  };
  for (bool bf16 : {false, true})
    for (int d : {72, 128, 13, 40, 96, 136, 256})
      for (int group : {1, 4, 5})
        for (std::int64_t n : {1, 3, 8, 21}) {
          const std::int64_t stride = 3 * d;
          std::vector<std::uint16_t> rows(static_cast<std::size_t>(n * stride));
          std::vector<double> value(rows.size());
          for (std::size_t e = 0; e < rows.size(); ++e) {
            const float f = uniform();
            if (bf16) {
              const auto h = Eigen::bfloat16(f);
              rows[e] = Eigen::numext::bit_cast<std::uint16_t>(h);
              value[e] = static_cast<float>(h);
            } else {
              const auto h = Eigen::half(f);
              rows[e] = Eigen::numext::bit_cast<std::uint16_t>(h);
              value[e] = static_cast<float>(h);
            }
          }
          std::vector<float> q(static_cast<std::size_t>(group) * d), weights(static_cast<std::size_t>(group) * n);
          for (float& x : q) x = uniform();
          for (float& x : weights) x = uniform();
          std::vector<float> scores(weights.size(), std::nanf(""));
          const cpu::fused::Prefetch ahead(rows.data(), rows.size() * sizeof(rows[0]));
          cpu::fused::dots(q.data(), group, d, rows.data(), stride, n, bf16, scores.data(), n, ahead);
          std::vector<float> out(static_cast<std::size_t>(group) * d, 0.25f);
          cpu::fused::accumulate(weights.data(), n, group, rows.data(), stride, n, d, bf16, out.data(), ahead);
          double worst_dot = 0, worst_out = 0;
          for (int r = 0; r < group; ++r) {
            for (std::int64_t j = 0; j < n; ++j) {
              double want = 0;
              for (int x = 0; x < d; ++x) want += double(q[r * d + x]) * value[j * stride + x];
              worst_dot = std::max(worst_dot, std::abs(scores[r * n + j] - want));
            }
            for (int x = 0; x < d; ++x) {
              double want = 0.25;
              for (std::int64_t j = 0; j < n; ++j) want += double(weights[r * n + j]) * value[j * stride + x];
              worst_out = std::max(worst_out, std::abs(out[r * d + x] - want));
            }
          }
          // fp32 accumulation of at most 256 terms of magnitude <= 0.25: far below 1e-5 when right,
          // O(0.1) when a row, weight or column is wrong (NaN fails too).
          BOOST_TEST(worst_dot < 1e-5, "dots bf16=" << bf16 << " D=" << d << " rows=" << group << " n=" << n);
          BOOST_TEST(worst_out < 1e-5, "accumulate bf16=" << bf16 << " D=" << d << " rows=" << group << " n=" << n);
        }
}

BOOST_AUTO_TEST_CASE(bf16_tile_products_match_an_fp64_loop) {
  // The bf16 tile products (AMX or AVX512-BF16, as this process chose: SWA_CPU_ISA=avx512-bf16 takes the
  // latter) on their own, against fp64 sums of the same bf16 values: query rows past
  // one 32-row pair of tiles with a remainder or filling two, key counts with a partial 32-key block, runs of blocks
  // that start past the first, head sizes padded to 32 (13, 40, 72) or not (128), and keys strided
  // as in a block of 2 kv heads.
  if (!cpu::amx::available()) {
    BOOST_TEST_MESSAGE("skipped: no bf16 tile products here (" << cpu::amx::products_name() << ")");
    return;
  }
  BOOST_TEST_MESSAGE("bf16 tile products: " << cpu::amx::products_name());
  std::uint32_t state = 777;
  auto bf16_value = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(Eigen::bfloat16(static_cast<float>(state >> 8) / 16777216.f - 0.5f));
  };
  for (int d : {13, 40, 72, 128})
    for (std::int64_t rows : {1, 17, 40, 64})  // 64: whole tiles, so P x V accumulates on out in place at D 128
      for (std::int64_t count : {5, 33, 100}) {
        const std::int64_t stride = 2 * d;
        std::vector<float> k(static_cast<std::size_t>(count * stride)), v(k.size()), q(static_cast<std::size_t>(rows * d));
        for (float& x : k) x = bf16_value();
        for (float& x : v) x = bf16_value();
        for (float& x : q) x = bf16_value();
        cpu::amx::PackedKeys keys;
        keys.pack(k.data(), v.data(), stride, count, d);
        cpu::amx::PackedQueries queries;
        queries.pack(q.data(), rows, d, keys.dims);
        for (std::int64_t first_block = 0; first_block < keys.blocks(); ++first_block) {
          const std::int64_t blocks = keys.blocks() - first_block, cols = 32 * blocks;
          std::vector<float> scores(static_cast<std::size_t>(queries.padded_rows * cols), std::nanf(""));
          cpu::amx::tile_scores(queries, keys, first_block, blocks, scores.data());
          std::vector<float> weights(static_cast<std::size_t>(rows * cols));
          for (float& w : weights) w = bf16_value() + 0.5f + 1e-3f;  // rounded again to bf16 inside
          std::vector<float> out(static_cast<std::size_t>(rows * d), 0.25f);
          cpu::amx::ValueScratch scratch;
          cpu::amx::add_weighted_values(weights.data(), rows, keys, first_block, blocks, scratch, out.data());
          double worst_score = 0, worst_out = 0;
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
              const std::int64_t key = first_block * 32 + c;
              double want = 0, size = 1e-30;
              for (int x = 0; key < count && x < d; ++x) {
                want += double(q[r * d + x]) * k[key * stride + x];
                size += std::abs(double(q[r * d + x]) * k[key * stride + x]);
              }
              worst_score = std::max(worst_score, std::abs(scores[r * cols + c] - want) / size);
            }
            for (int x = 0; x < d; ++x) {
              double want = 0.25, size = 0.25;
              for (std::int64_t c = 0; c < cols && first_block * 32 + c < count; ++c) {
                const double w = static_cast<float>(Eigen::bfloat16(weights[r * cols + c]));
                want += w * v[(first_block * 32 + c) * stride + x];
                size += std::abs(w * v[(first_block * 32 + c) * stride + x]);
              }
              worst_out = std::max(worst_out, std::abs(out[r * d + x] - want) / size);
            }
          }
          // fp32 sums of exact products: a few units of 2^-24 relative to the sum of magnitudes.
          BOOST_TEST(worst_score < 1e-6, "scores D=" << d << " rows=" << rows << " keys=" << count << " from block "
                                                    << first_block << ": " << worst_score);
          BOOST_TEST(worst_out < 1e-6, "P.V D=" << d << " rows=" << rows << " keys=" << count << " from block "
                                                << first_block << ": " << worst_out);
        }
      }
}

BOOST_AUTO_TEST_CASE(bf16_softmax_weights_match_an_fp64_loop) {
  // The fused exp + bf16 rounding + sum of the bf16 products' weights (bf16_weights.hpp) against
  // exp in fp64: each weight is exp's bf16 rounding, or its neighbour where exp lies within the
  // approximation's error (bf16_weights.hpp) of a rounding boundary; -inf (a masked key) gives +0,
  // NaN stays NaN.
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) {
    BOOST_TEST_MESSAGE("skipped: no AVX512F");
    return;
  }
  std::vector<float> scores;
  for (int i = 0; i <= 200000; ++i) scores.push_back(static_cast<float>(-105.0 * i / 200000.0));  // past exp's underflow
  for (float x : {0.f, -0.f, -1e-7f, -0.5f, -1.f, -87.3f, -103.9f}) scores.push_back(x);
  const std::size_t masked = scores.size();
  scores.push_back(-std::numeric_limits<float>::infinity());
  while (scores.size() % 16) scores.push_back(-2.f);
  const float shift = 1.25f;
  for (float& s : scores) s += shift;  // the kernel subtracts the row's shift first
  std::vector<std::uint16_t> bits(scores.size());
  const float sum = cpu::bf16_weights::round_row(scores.data(), static_cast<std::int64_t>(scores.size()), shift, bits.data());
  auto as_float = [](std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); };
  double expected_sum = 0;
  int off_by_one = 0, wrong = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const double e = std::exp(static_cast<double>(scores[i] - shift));
    const float nearest = round_to(DType::bf16, static_cast<float>(e));
    const float got = as_float(bits[i]);
    expected_sum += got;
    if (got == nearest && !(e == 0 && std::signbit(got))) continue;
    const auto nearest_bits = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(nearest) >> 16);
    const bool neighbour = bits[i] == nearest_bits + 1 || bits[i] + 1 == nearest_bits;
    const double boundary = std::fabs(e - (static_cast<double>(got) + nearest) / 2);
    const double x = std::fabs(static_cast<double>(scores[i] - shift));
    // Below FLT_MIN the weight is subnormal (and the products flush it): one step either way.
    const bool subnormal = e < std::numeric_limits<float>::min();
    if (neighbour && (subnormal || boundary <= (3e-6 + 1.2e-7 * x) * e)) {
      ++off_by_one;
      continue;
    }
    if (++wrong <= 5)
      BOOST_ERROR("x " << scores[i] - shift << ": bf16 weight " << got << ", exp rounds to " << nearest << " (exp "
                       << e << ")");
  }
  BOOST_TEST(wrong == 0);
  BOOST_TEST_MESSAGE(off_by_one << " of " << scores.size() << " weights one bf16 step off (exp within the error of a tie)");
  // 12501 terms a lane in fp32: about 1e-5 relative in a random walk of roundings (7.5e-4 at worst).
  BOOST_TEST(std::fabs(sum - expected_sum) <= 1e-4 * expected_sum, "sum " << sum << " against " << expected_sum);
  BOOST_TEST(bits[masked] == 0u, "-inf gives +0");
  std::vector<float> nan_row(16, shift);
  nan_row[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::uint16_t> nan_bits(16);
  BOOST_TEST(std::isnan(cpu::bf16_weights::round_row(nan_row.data(), 16, shift, nan_bits.data())));
  BOOST_TEST(std::isnan(as_float(nan_bits[3])));
  BOOST_TEST(as_float(nan_bits[0]) == 1.f);
  std::vector<float> ramp(48);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i) - 100.f;
  BOOST_TEST(cpu::bf16_weights::row_max(ramp.data(), 48, -1000.f) == -53.f);  // the last lane of the last block
  BOOST_TEST(cpu::bf16_weights::row_max(ramp.data(), 48, 7.f) == 7.f);
#else
  BOOST_TEST_MESSAGE("skipped: not x86-64");
#endif
}

BOOST_AUTO_TEST_CASE(fp8_kv_in_every_mode_and_cache) {
  for (KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2})
    for (DType dt : kAllDTypes) {
      Case pre = make_case({130, 1, 67}, 4, 2, 64, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
      BOOST_TEST(cpu_verdict(test::with_fp8(pre, f)) == "pass", kv_format_name(f) << " prefill " << dtype_name(dt));
      for (CachePolicy cache : kAllCachePolicies) {
        Case chunked = make_case({150, 9}, 8, 2, 64, 20, RunMode::chunked_prefill, cache, 7, 0, dt);
        BOOST_TEST(cpu_verdict(test::with_fp8(chunked, f)) == "pass",
                   kv_format_name(f) << " chunked " << cache_name(cache) << " " << dtype_name(dt));
        // Several decode tiles and splits, partly visible tiles, and the in-place path's FP8 reads.
        Case dec = make_case({760, 40, 530}, 8, 2, 64, 300, RunMode::decode, cache, 97, 6, dt);
        BOOST_TEST(cpu_verdict(test::with_fp8(dec, f)) == "pass",
                   kv_format_name(f) << " decode " << cache_name(cache) << " " << dtype_name(dt));
      }
    }
}

BOOST_AUTO_TEST_CASE(fp8_codec_agrees_with_the_golden) {
  // The DUTs' float codec (swa/dut/fp8.hpp) against the golden's exact one, on every code, every
  // fp16 and bf16 bit pattern as input (each times several powers of two), and the midpoints
  // between neighbouring FP8 values with the floats either side of them.
  for (KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2}) {
    const bool e4m3 = f == KvFormat::fp8_e4m3;
    int wrong = 0;
    for (int c = 0; c < 256; ++c) {
      const double want = fp8_decode(f, static_cast<std::uint8_t>(c));
      const float got = fp8_to_float(static_cast<std::uint8_t>(c), e4m3);
      wrong += !(want == got || (std::isnan(want) && std::isnan(got)));
    }
    BOOST_TEST(wrong == 0, kv_format_name(f) << ": decodes that differ");
    // The CPU kernels' block decode (through fp16 and the run-time chosen conversion), every code
    // in a block longer than one conversion block, times descales inside and at the edge of range.
    std::vector<std::uint8_t> codes(600);
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i * 7 % 256);
    std::vector<float> got(codes.size());
    for (float descale : {1.f, 0.0078125f, 0.3f, 1.f / 16384, 4096.f}) {
      cpu::fp8_to_fp32(codes.data(), got.data(), static_cast<std::int64_t>(codes.size()), e4m3, descale);
      wrong = 0;
      for (std::size_t i = 0; i < codes.size(); ++i) {
        const float want = fp8_to_float(codes[i], e4m3) * descale;
        wrong += !(want == got[i] || (std::isnan(want) && std::isnan(got[i])));
      }
      BOOST_TEST(wrong == 0, kv_format_name(f) << ": block decode, descale " << descale);
    }
    std::vector<float> xs;
    for (std::uint32_t bits = 0; bits < 65536; ++bits) {
      const auto b16 = static_cast<std::uint16_t>(bits);
      for (float s : {1.f, 0.0078125f, 256.f, 1.f / 65536}) {
        xs.push_back(static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(b16)) * s);
        xs.push_back(static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(b16)) * s);
      }
    }
    for (int c = 0; c < 0x7f; ++c) {
      const float mid = static_cast<float>((fp8_decode(f, static_cast<std::uint8_t>(c)) +
                                            fp8_decode(f, static_cast<std::uint8_t>(c + 1))) / 2);
      for (float x : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, INFINITY)}) xs.push_back(x), xs.push_back(-x);
    }
    wrong = 0;
    int shown = 0;
    for (float x : xs) {
      const std::uint8_t want = fp8_encode(f, x), got = fp8_from_float(x, e4m3);
      if (want != got && !(std::isnan(x) && (got & 0x7f) == 0x7f)) {
        if (shown++ < 5) BOOST_TEST_MESSAGE(kv_format_name(f) << " x=" << x << " golden " << int(want) << " dut " << int(got));
        ++wrong;
      }
    }
    BOOST_TEST(wrong == 0, kv_format_name(f) << ": encodings that differ, of " << xs.size());
    // Without saturation (the mutants' fault): beyond the largest value e4m3 gives NaN, e5m2 inf.
    const float beyond = static_cast<float>(fp8_max(f)) * 1.25f;
    BOOST_TEST(std::isnan(fp8_to_float(fp8_from_float(beyond, e4m3, false), e4m3)) == e4m3);
    BOOST_TEST(std::isinf(fp8_to_float(fp8_from_float(beyond, e4m3, false), e4m3)) == !e4m3);
    BOOST_TEST(fp8_from_float(static_cast<float>(fp8_max(f)), e4m3, false) == fp8_encode(f, fp8_max(f)));
  }
}

BOOST_AUTO_TEST_CASE(sinks_soft_cap_and_two_sided_windows) {
  // Large logits (sigma 3: scores of order 10-50) so the cap bends them; caps 50 (Gemma 2) and 5.
  for (DType dt : kAllDTypes)
    for (int d : {64, 128}) {
      for (float cap : {0.f, 5.f, 50.f})
        for (bool sinks : {false, true}) {
          Case pre = make_case({130, 1, 67}, 4, 2, d, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt, 3.0);
          BOOST_TEST(cpu_verdict(test::with_semantics(pre, cap, sinks)) == "pass",
                     "prefill " << dtype_name(dt) << " D=" << d << " cap=" << cap << " sinks=" << sinks);
          Case chunked = make_case({150, 9}, 8, 2, d, 20, RunMode::chunked_prefill, CachePolicy::ring_compact, 7, 0, dt, 3.0);
          BOOST_TEST(cpu_verdict(test::with_semantics(chunked, cap, sinks)) == "pass",
                     "chunked " << dtype_name(dt) << " D=" << d << " cap=" << cap << " sinks=" << sinks);
          Case dec = make_case({60, 30, 27}, 8, 2, d, 16, RunMode::decode, CachePolicy::ring_modulo, 9, 25, dt, 3.0);
          BOOST_TEST(cpu_verdict(test::with_semantics(dec, cap, sinks)) == "pass",
                     "decode " << dtype_name(dt) << " D=" << d << " cap=" << cap << " sinks=" << sinks);
        }
      for (std::int64_t right : {1, 5, 40}) {
        Case two = make_case({130, 1, 67}, 4, 2, d, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
        BOOST_TEST(cpu_verdict(test::with_semantics(two, 0.f, right == 5, right)) == "pass",
                   "two-sided R=" << right << " " << dtype_name(dt) << " D=" << d);
      }
    }
}

BOOST_AUTO_TEST_CASE(tile_sizes_do_not_change_the_answer) {
  // bf16 too: on an AMX CPU its tiles read whole 32-key blocks that odd tile sizes cut across.
  for (DType dt : {DType::fp32, DType::bf16})
    for (CpuTuning t : {CpuTuning{16, 16}, CpuTuning{64, 64}, CpuTuning{128, 32}, CpuTuning{7, 13}, CpuTuning{64, 128}}) {
      Case c = make_case({301, 45}, 4, 1, 80, 70, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
      BOOST_TEST(cpu_verdict(c, t) == "pass", dtype_name(dt) << " tiles " << t.query_tile << "x" << t.key_tile);
    }
}

BOOST_AUTO_TEST_CASE(one_and_two_threads_both_match_the_golden_and_repeat_exactly) {
  for (RunMode mode : kAllRunModes) {
    std::vector<float> first;
    for (int threads : {1, 2, 2}) {
      omp_set_num_threads(threads);
      // batch x kv heads = 1 < 2 threads and a 150-slot ring: decode splits the window across threads.
      Case c = make_case({300}, 4, 1, 64, 150, mode, CachePolicy::ring_compact, 30, mode == RunMode::decode ? 40 : 0);
      BOOST_TEST(cpu_verdict(c) == "pass", mode_name(mode) << " threads " << threads);
      if (threads == 2 && first.empty()) first = c.output();
      else if (threads == 2) BOOST_TEST((c.output() == first), "repeat at a fixed thread count is bit-identical");
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

BOOST_AUTO_TEST_CASE(masks_are_read_not_assumed) {
  for (std::int64_t w : {129, 300}) {
    std::vector<float> mask;
    Case plain = make_case({700, 300}, 4, 2, 128, w, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::fp16);
    BOOST_TEST(cpu_verdict(plain) == "pass");
    for (MaskFormat f : {MaskFormat::swa_norm, MaskFormat::swa_compress}) {
      Case c = masked_case(f, mask, w, 128);
      BOOST_TEST(cpu_verdict(c) == "pass", mask_format_name(f) << " W=" << w);
      if (f == MaskFormat::swa_norm)  // same tiles as the computed window, so the same bits
        BOOST_TEST((c.output() == plain.output()), "a consistent dense mask gives the computed window's bits");
      // Corrupt an element the kernel reads where the window keeps the key: the output must move.
      // (The compressed mask's diagonal tiles read its top-left block.)
      Case broken = masked_case(f, mask, w, 128);
      const std::int64_t row = f == MaskFormat::swa_norm ? 650 : 100, col = f == MaskFormat::swa_norm ? 649 : 50;
      mask[row * broken.p.mask_rows + col] = -65536.f;
      BOOST_TEST(cpu_error(broken) > 1e-3, mask_format_name(f) << " corrupted W=" << w);
    }
    // The compressed mask read with the other sample's effective window breaks where they differ.
    Case crossed = masked_case(MaskFormat::swa_compress, mask, 512, 128);  // python T=384
    crossed.p.mask_effective_window = compress_geometry(AtbSample::cpp, 128, 512).effective_window;  // 256
    BOOST_TEST(cpu_error(crossed) > 1e-3);
  }
}

BOOST_AUTO_TEST_CASE(compressed_mask_in_chunked_prefill_is_a_skip_not_a_failure) {
  std::vector<float> mask;
  Case c = masked_case(MaskFormat::swa_compress, mask, 129, 64);
  c.p.mode = RunMode::chunked_prefill;
  c.p.chunk = 100;
  const Support s = make_cpu_dut()->supports(c.p);
  BOOST_TEST(!s.run);
  BOOST_TEST(s.skip_reason.find("aligned") != std::string::npos);
}

namespace {

// The level the CPU DUT should run, worked out here from the CPU's flags and SWA_CPU_ISA, apart
// from isa_levels.cpp's choice.
std::string expected_level() {
#if defined(__x86_64__)
  const char* isa = std::getenv("SWA_CPU_ISA");
  const std::string setting = isa ? isa : "";
  if (setting == "portable") return "x86-64";
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    swa::dut::cpu::cpu_has_f16c() && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("movbe");
  if (avx512 && avx2 && setting != "x86-64-v3") return "x86-64-v4";
  return avx2 ? "x86-64-v3" : "x86-64";
#else
  return "native";
#endif
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_best_level_the_cpu_runs_is_chosen_and_named) {
  const std::string path = cpu_kernel_path();
  BOOST_TEST_MESSAGE("CPU kernels: " << path);
  BOOST_TEST(cpu::level_name(cpu::chosen_level()) == expected_level());
  BOOST_TEST(path.find("run time): " + expected_level() + " kernels") != std::string::npos, path);
}

BOOST_AUTO_TEST_CASE(every_level_this_cpu_runs_matches_the_golden) {
  // Each level's kernels in one process, whatever SWA_CPU_ISA chose: prefill, chunked prefill and
  // decode in every dtype, a head size off every SIMD width, sinks and a soft-cap.
  int levels_run = 0;
  for (cpu::IsaLevel level : {cpu::IsaLevel::x86_64, cpu::IsaLevel::x86_64_v3, cpu::IsaLevel::x86_64_v4,
                              cpu::IsaLevel::native}) {
    if (!cpu::cpu_runs(level)) {
      BOOST_TEST_MESSAGE("level " << cpu::level_name(level) << ": skipped (not this CPU's or not in this build)");
      continue;
    }
    ++levels_run;
    BOOST_TEST_MESSAGE("level " << cpu::level_name(level) << ": Eigen " << cpu::level_gemm_simd(level));
    auto dut = cpu::make_level_dut(level, CpuTuning{});
    for (DType dt : kAllDTypes) {
      Case pre = make_case({130, 1, 67}, 8, 2, 72, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
      test::with_semantics(pre, 30.f, true);
      BOOST_TEST(test::verdict(*dut, pre) == "pass", cpu::level_name(level) << " prefill " << dtype_name(dt));
      Case chunk = make_case({150, 9}, 8, 2, 40, 20, RunMode::chunked_prefill, CachePolicy::linear, 7, 0, dt);
      BOOST_TEST(test::verdict(*dut, chunk) == "pass", cpu::level_name(level) << " chunked " << dtype_name(dt));
      Case dec = make_case({300, 40}, 8, 2, 136, 200, RunMode::decode, CachePolicy::ring_modulo, 97, 6, dt);
      BOOST_TEST(test::verdict(*dut, dec) == "pass", cpu::level_name(level) << " decode " << dtype_name(dt));
    }
  }
  BOOST_TEST(levels_run >= 1);
}
