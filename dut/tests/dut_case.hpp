#pragma once
// Test helper for DUTs: a packed problem with owned buffers in the run's dtype, and the error of a
// DUT's output against the golden.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "swa/dut/dut.hpp"
#include "swa/golden.hpp"

namespace swa::dut::test {

struct Case {
  std::vector<std::int32_t> lens;
  std::vector<std::int64_t> offsets;
  std::vector<unsigned char> q, k, v, out;
  AttnParams p;

  std::vector<float> output() const {
    std::vector<float> o(out.size() / dtype_bytes(p.dtype));
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = load_from(p.dtype, &out[i * dtype_bytes(p.dtype)]);
    return o;
  }
};

inline std::vector<unsigned char> random_storage(std::int64_t n, DType dt, double sigma, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, sigma);
  std::vector<unsigned char> t(static_cast<std::size_t>(n) * dtype_bytes(dt));
  for (std::int64_t i = 0; i < n; ++i) store_as(dt, static_cast<float>(normal(rng)), &t[i * dtype_bytes(dt)]);
  return t;
}

inline Case make_case(std::vector<std::int32_t> lens, int hq, int hkv, int d, std::int64_t w, RunMode mode,
                      CachePolicy cache, int chunk, int steps, DType dt = DType::fp32, double sigma = 1.0) {
  Case c;
  c.lens = std::move(lens);
  c.offsets.assign(c.lens.size() + 1, 0);
  for (std::size_t b = 0; b < c.lens.size(); ++b) c.offsets[b + 1] = c.offsets[b] + c.lens[b];
  const std::int64_t n = c.offsets.back();
  std::mt19937_64 rng(42);
  c.q = random_storage(n * hq * d, dt, sigma, rng);
  c.k = random_storage(n * hkv * d, dt, sigma, rng);
  c.v = random_storage(n * hkv * d, dt, 1.0, rng);
  c.out.resize(static_cast<std::size_t>(n) * hq * d * dtype_bytes(dt));
  for (std::size_t i = 0; i < c.out.size() / dtype_bytes(dt); ++i)
    store_as(dt, std::numeric_limits<float>::quiet_NaN(), &c.out[i * dtype_bytes(dt)]);
  AttnParams& p = c.p;
  p.q = c.q.data();
  p.k = c.k.data();
  p.v = c.v.data();
  p.out = c.out.data();
  p.dtype = dt;
  p.batch = static_cast<int>(c.lens.size());
  p.seq_lens = c.lens.data();
  p.seq_offsets = c.offsets.data();
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_size = d;
  p.band = band_from_window(w, WindowConvention::keys_including_self);
  p.scale = default_scale(d);
  p.mode = mode;
  p.cache = cache;
  p.chunk = chunk;
  p.decode_steps = steps;
  set_contiguous_strides(p);
  return c;
}

// Runs the DUT through the schedule; max |out - golden| / max |golden|, infinity on NaN/Inf.
inline double relative_error(Dut& dut, Case& c) {
  if (!run_schedule(dut, c.p).ok) return std::numeric_limits<double>::infinity();
  const auto g = golden::run(c.p);
  const auto o = c.output();
  double worst = 0, ref = 0;
  for (std::size_t i = 0; i < g.out.size(); ++i) {
    const double e = std::abs(o[i] - g.out[i]);
    if (!std::isfinite(e)) return std::numeric_limits<double>::infinity();  // std::max would drop a NaN
    worst = std::max(worst, e);
    ref = std::max(ref, std::abs(g.out[i]));
  }
  return worst / ref;
}

}  // namespace swa::dut::test
