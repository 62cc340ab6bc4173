#pragma once
// Test helper: a packed ragged problem with owned buffers, filled from a fixed-seed generator.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "swa/golden.hpp"
#include "swa/paging.hpp"
#include "swa/params.hpp"

namespace swa::test {

struct Problem {
  std::vector<std::int32_t> seq_lens;
  std::vector<std::int64_t> offsets;
  std::vector<unsigned char> q, k, v;
  std::vector<float> sinks;
  std::vector<std::int32_t> page_order;
  AttnParams params;
};

// A paged cache of `page_size` with the pool the schedule needs (plus `spare` pages), its initial
// order shuffled by `seed`. Call after the schedule (mode, chunk, decode_steps) is set.
inline void use_paged_cache(Problem& pr, int page_size, std::uint64_t seed, int spare = 0) {
  AttnParams& p = pr.params;
  p.cache = CachePolicy::paged;
  p.page_size = page_size;
  p.pool_pages = static_cast<int>(paged_pool_pages(p)) + spare;
  pr.page_order.resize(p.pool_pages);
  for (int i = 0; i < p.pool_pages; ++i) pr.page_order[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(pr.page_order.begin(), pr.page_order.end(), rng);
  p.page_order = pr.page_order.data();
}

// One sink logit per query head, N(mean, 1) rounded to the problem's dtype.
inline void add_sinks(Problem& pr, std::uint64_t seed, double mean = 0.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(mean, 1.0);
  pr.sinks.resize(pr.params.heads_q);
  for (float& s : pr.sinks) s = round_to(pr.params.dtype, static_cast<float>(normal(rng)));
  pr.params.sinks = pr.sinks.data();
}

inline std::vector<unsigned char> random_tensor(std::int64_t elems, DType dt, std::mt19937_64& rng, double sigma) {
  std::normal_distribution<double> normal(0.0, sigma);
  std::vector<unsigned char> t(static_cast<std::size_t>(elems) * dtype_bytes(dt));
  for (std::int64_t i = 0; i < elems; ++i) store_as(dt, static_cast<float>(normal(rng)), &t[i * dtype_bytes(dt)]);
  return t;
}

inline Problem make_problem(std::vector<std::int32_t> seq_lens, int heads_q, int heads_kv, int head_size,
                            WindowBand band, DType dt, std::uint64_t seed, double sigma = 1.0) {
  Problem pr;
  pr.seq_lens = std::move(seq_lens);
  pr.offsets.assign(pr.seq_lens.size() + 1, 0);
  for (std::size_t b = 0; b < pr.seq_lens.size(); ++b) pr.offsets[b + 1] = pr.offsets[b] + pr.seq_lens[b];
  const std::int64_t n = pr.offsets.back();
  std::mt19937_64 rng(seed);
  pr.q = random_tensor(n * heads_q * head_size, dt, rng, sigma);
  pr.k = random_tensor(n * heads_kv * head_size, dt, rng, sigma);
  pr.v = random_tensor(n * heads_kv * head_size, dt, rng, 1.0);
  AttnParams& p = pr.params;
  p.q = pr.q.data();
  p.k = pr.k.data();
  p.v = pr.v.data();
  p.dtype = dt;
  p.batch = static_cast<int>(pr.seq_lens.size());
  p.seq_lens = pr.seq_lens.data();
  p.seq_offsets = pr.offsets.data();
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_size = head_size;
  p.band = band;
  p.scale = default_scale(head_size);
  set_contiguous_strides(p);
  return pr;
}

// max |a - b| / max |b|
inline double normwise_relative(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    ref = std::max(ref, std::abs(b[i]));
  }
  return diff / ref;
}

inline double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace swa::test
