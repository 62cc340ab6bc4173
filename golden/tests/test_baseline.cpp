#define BOOST_TEST_MODULE golden_baseline
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "../src/key_tiles.hpp"
#include "problem.hpp"
#include "swa/baseline.hpp"

using namespace swa;

namespace {
double relative_l2(const std::vector<float>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}
// The baseline's documented rounding points (baseline.hpp), one row at a time with no tiling: what
// the tiled, register-blocked baseline must equal bit for bit.
std::vector<float> baseline_by_rows(const AttnParams& p) {
  const int D = p.head_size;
  std::vector<float> out(static_cast<std::size_t>(total_tokens(p)) * p.heads_q * D, 0.f);
  const auto at = [&](const void* base, std::int64_t row_stride, std::int64_t head_stride, std::int64_t row, int head,
                      int d) {
    return static_cast<float>(load_from(p.dtype, static_cast<const unsigned char*>(base) +
                                                     (row * row_stride + head * head_stride + d) * dtype_bytes(p.dtype)));
  };
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int kvh = kv_head_for(h, p.heads_q, p.heads_kv);
      const std::int64_t row0 = p.seq_offsets[b], len = p.seq_lens[b];
      for (std::int64_t i = 0; i < len; ++i) {
        const std::int64_t first = band_first_key(p.band, i), end = band_end_key(p.band, i, len);
        if (first >= end) continue;
        std::vector<float> q(D), s;
        for (int d = 0; d < D; ++d) q[d] = round_to(p.dtype, at(p.q, p.q_row_stride, p.q_head_stride, row0 + i, h, d) * p.scale);
        for (std::int64_t j = first; j < end; ++j) {
          float lane[8] = {};
          for (int d = 0; d < D; ++d) lane[d % 8] += q[d] * at(p.k, p.k_row_stride, p.k_head_stride, row0 + j, kvh, d);
          float x = round_to(p.dtype, ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7])));
          if (p.softcap > 0.f) x = round_to(p.dtype, p.softcap * std::tanh(x / p.softcap));
          s.push_back(x);
        }
        const float sink = p.sinks ? p.sinks[h] : -INFINITY;
        float m = sink;
        for (float x : s) m = std::max(m, x);
        float sum = p.sinks ? std::exp(sink - m) : 0.f;
        for (float& x : s) {
          x = std::exp(x - m);
          sum += x;
        }
        for (float& x : s) x = round_to(p.dtype, x / sum);
        for (int d = 0; d < D; ++d) {
          float acc = 0.f;
          for (std::int64_t j = first; j < end; ++j) acc += s[j - first] * at(p.v, p.v_row_stride, p.v_head_stride, row0 + j, kvh, d);
          out[((row0 + i) * p.heads_q + h) * D + d] = round_to(p.dtype, acc);
        }
      }
    }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(tiled_baseline_equals_its_rounding_points_row_by_row) {
  // Head sizes off the 8- and 64-wide register blocks, rows whose windows start and end inside a tile,
  // GQA, a two-sided band, soft-capping and sinks.
  struct Shape {
    std::vector<std::int32_t> lens;
    int hq, hkv, d;
    WindowBand band;
    DType dt;
    float softcap;
    bool sinks;
  };
  for (const Shape& sh : {Shape{{70, 9}, 4, 2, 13, {20, 0}, DType::fp16, 0.f, false},
                          Shape{{100}, 2, 1, 72, {37, 5}, DType::bf16, 0.f, true},
                          Shape{{90, 40}, 3, 3, 136, {50, 0}, DType::fp32, 20.f, true},
                          Shape{{33}, 2, 2, 8, {-1, 0}, DType::fp16, 0.f, false}}) {
    test::Problem pr = test::make_problem(sh.lens, sh.hq, sh.hkv, sh.d, sh.band, sh.dt, 5);
    pr.params.softcap = sh.softcap;
    if (sh.sinks) test::add_sinks(pr, 6);
    const auto tiled = baseline::attention(pr.params);
    const auto rows = baseline_by_rows(pr.params);
    BOOST_TEST((tiled == rows), "D=" << sh.d << " " << dtype_name(sh.dt));
  }
}

// Levels from numerics.md for N(0,1) inputs; the baseline's error must be of that order, neither
// zero (it would not be a same-precision baseline) nor far above it.
BOOST_AUTO_TEST_CASE(error_levels_per_dtype) {
  struct Level {
    DType dt;
    double low, high;
  };
  for (Level l : {Level{DType::fp32, 1e-9, 1e-5}, Level{DType::fp16, 5e-5, 2e-3}, Level{DType::bf16, 5e-4, 2e-2}}) {
    const test::Problem pr = test::make_problem({64, 33}, 4, 2, 64, {15, 0}, l.dt, 3);
    const auto g = golden::attention_dense(pr.params);
    const auto b = baseline::attention(pr.params);
    const double err = relative_l2(b, g.out);
    BOOST_TEST_MESSAGE(dtype_name(l.dt) << " baseline relative L2 " << err);
    BOOST_TEST(err > l.low, dtype_name(l.dt));
    BOOST_TEST(err < l.high, dtype_name(l.dt));
    for (float x : b) BOOST_TEST_REQUIRE(round_to(l.dt, x) == x);  // outputs are values of the dtype
  }
}

BOOST_AUTO_TEST_CASE(baseline_respects_the_window) {
  // Changing a key outside every window changes nothing; inside it changes the output.
  test::Problem pr = test::make_problem({20}, 1, 1, 8, {2, 0}, DType::fp32, 4);
  const auto before = baseline::attention(pr.params);
  auto* k = reinterpret_cast<float*>(pr.k.data());
  k[10 * 8] += 5.f;  // key 10 is seen by queries 10..12 only
  const auto after = baseline::attention(pr.params);
  for (int t = 0; t < 20; ++t) {
    bool changed = false;
    for (int d = 0; d < 8; ++d) changed |= before[t * 8 + d] != after[t * 8 + d];
    BOOST_TEST(changed == (t >= 10 && t <= 12), "token " << t);
  }
}

BOOST_AUTO_TEST_CASE(row_without_visible_keys_outputs_zero) {
  golden::detail::KeyTiles keys;
  const std::vector<double> k(4, 1.0), v(4, 2.0), q(4, 1.0);
  keys.reset(4, 1);
  keys.append(k.data(), v.data());
  std::vector<double> out(4, 7.0);
  double lse = 7.0;
  golden::detail::BlockScratch s;
  s.rows.push_back({q.data(), 1, 1, -INFINITY, out.data(), &lse});
  golden::detail::attend_block(keys, 4, 1.0, 0.0, s);
  for (double x : out) BOOST_TEST(x == 0.0);
  BOOST_TEST(std::isinf(lse));
  BOOST_TEST(lse < 0);
}
