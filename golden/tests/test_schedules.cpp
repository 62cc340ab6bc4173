#define BOOST_TEST_MODULE golden_schedules
// Chunked prefill and decode through every cache policy equal the dense definition.
#include <omp.h>

#include <boost/test/unit_test.hpp>
#include <random>
#include <sstream>

#include "problem.hpp"
#include "swa/kv_cache_model.hpp"
#include "swa/ring_slots.hpp"

using namespace swa;

namespace {

constexpr double kBound = 1e-13;  // both paths are fp64 with compensated sums; only visiting order differs

struct Schedule {
  RunMode mode;
  int chunk;
  int decode_steps;
};

std::string describe(const test::Problem& pr, std::int64_t w, Schedule s, CachePolicy c) {
  std::ostringstream o;
  o << "seq_lens=";
  for (auto l : pr.seq_lens) o << l << ",";
  o << " W=" << w << " mode=" << mode_name(s.mode) << " chunk=" << s.chunk << " steps=" << s.decode_steps
    << " cache=" << cache_name(c);
  return o.str();
}

// Score semantics a schedule must carry through every chunk and step.
struct Semantics {
  float softcap = 0.f;
  bool sinks = false;
};

void check_schedule(std::vector<std::int32_t> lens, std::int64_t w, Schedule s, std::uint64_t seed,
                    Semantics sem = {}) {
  for (CachePolicy c : kAllCachePolicies) {
    test::Problem pr = test::make_problem(lens, 4, 2, 16, band_from_window(w, WindowConvention::keys_including_self),
                                          DType::bf16, seed, sem.softcap > 0 ? 3.0 : 1.0);
    pr.params.softcap = sem.softcap;
    if (sem.sinks) test::add_sinks(pr, seed + 1000);
    const auto dense = golden::attention_dense(pr.params);
    pr.params.mode = s.mode;
    pr.params.chunk = s.chunk;
    pr.params.decode_steps = s.decode_steps;
    pr.params.cache = c;
    if (c == CachePolicy::paged) test::use_paged_cache(pr, 3, seed);
    const auto sched = golden::attention_scheduled(pr.params);
    BOOST_TEST(test::normwise_relative(sched.out, dense.out) <= kBound, describe(pr, w, s, c));
    BOOST_TEST(test::normwise_relative(sched.lse, dense.lse) <= kBound, describe(pr, w, s, c));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(chunked_prefill_edges) {
  const std::int64_t w = 8;
  check_schedule({40}, w, {RunMode::chunked_prefill, 11, 0}, 1);  // C > W, does not divide, wrap inside a chunk
  check_schedule({40}, w, {RunMode::chunked_prefill, 8, 0}, 2);   // C = W: wraps exactly at chunk boundaries
  check_schedule({40}, w, {RunMode::chunked_prefill, 3, 0}, 3);   // C < W
  check_schedule({40}, w, {RunMode::chunked_prefill, 1, 0}, 4);   // token by token
  check_schedule({40}, w, {RunMode::chunked_prefill, 64, 0}, 5);  // one chunk longer than the prompt
  check_schedule({32}, w, {RunMode::chunked_prefill, 7, 0}, 6);   // prompt a multiple of W
  check_schedule({40}, 1, {RunMode::chunked_prefill, 5, 0}, 7);   // W = 1: self only
  check_schedule({12}, 40, {RunMode::chunked_prefill, 5, 0}, 8);  // W >= seq: causal
  check_schedule({1, 17, 9, 1}, 4, {RunMode::chunked_prefill, 6, 0}, 9);  // ragged, length-1 sequences
}

BOOST_AUTO_TEST_CASE(decode_edges) {
  check_schedule({30}, 8, {RunMode::decode, 0, 10}, 11);     // prompt 20 > W in one prefill, then steps
  check_schedule({30}, 8, {RunMode::decode, 6, 12}, 12);     // chunked prompt, then steps
  check_schedule({13}, 8, {RunMode::decode, 0, 12}, 13);     // prompt of 1: everything is decode
  check_schedule({20}, 64, {RunMode::decode, 0, 15}, 14);    // W >= seq
  check_schedule({20}, 1, {RunMode::decode, 0, 5}, 15);      // W = 1
  check_schedule({9, 26, 14}, 5, {RunMode::decode, 4, 8}, 16);  // ragged
}

BOOST_AUTO_TEST_CASE(sinks_and_soft_cap_through_the_cache) {
  check_schedule({40}, 8, {RunMode::chunked_prefill, 11, 0}, 21, {0.f, true});
  check_schedule({30}, 8, {RunMode::decode, 6, 12}, 22, {0.f, true});
  check_schedule({40}, 8, {RunMode::chunked_prefill, 3, 0}, 23, {5.f, false});
  check_schedule({9, 26, 14}, 5, {RunMode::decode, 4, 8}, 24, {10.f, true});
}

BOOST_AUTO_TEST_CASE(randomized_shapes) {
  std::mt19937_64 rng(2024);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<std::int32_t> lens(pick(1, 4));
    for (auto& l : lens) l = pick(1, 50);
    const std::int64_t w = pick(1, 24);
    const int min_len = *std::min_element(lens.begin(), lens.end());
    if (trial % 2 == 0 || min_len < 2) {
      check_schedule(lens, w, {RunMode::chunked_prefill, pick(1, 30), 0}, 100 + trial);
    } else {
      check_schedule(lens, w, {RunMode::decode, pick(0, 12), pick(1, min_len - 1)}, 100 + trial);
    }
  }
}

BOOST_AUTO_TEST_CASE(each_decode_step_equals_its_dense_row) {
  test::Problem pr = test::make_problem({25}, 2, 1, 32, {5, 0}, DType::fp16, 77);
  const auto dense = golden::attention_dense(pr.params);
  pr.params.mode = RunMode::decode;
  pr.params.decode_steps = 10;
  const auto dec = golden::attention_scheduled(pr.params);
  for (std::int64_t t = 15; t < 25; ++t)
    for (int i = 0; i < 2 * 32; ++i) BOOST_TEST(dec.out[t * 64 + i] == dense.out[t * 64 + i], boost::test_tools::tolerance(1e-13));
}

BOOST_AUTO_TEST_CASE(a_cache_holding_every_visible_key_gives_the_dense_bits) {
  // Both paths list a row's keys by position with the same list numbers modulo the key tile, so each
  // scheduled row is its dense row bit for bit: chunks longer and shorter than the window and than a
  // tile, chunks that do not divide the prompt, windows that are not a multiple of the tile, GQA.
  struct Shape {
    std::vector<std::int32_t> lens;
    std::int64_t w;
    Schedule s;
  };
  const std::vector<Shape> shapes = {
      {{97, 40}, 21, {RunMode::chunked_prefill, 7, 0}},   {{130}, 33, {RunMode::chunked_prefill, 50, 0}},
      {{64, 65}, 16, {RunMode::chunked_prefill, 16, 0}},  {{90}, 70, {RunMode::chunked_prefill, 3, 0}},
      {{120, 61}, 30, {RunMode::decode, 16, 9}},          {{77}, 19, {RunMode::decode, 0, 30}},
      {{50, 33}, 45, {RunMode::decode, 11, 20}},
  };
  for (const Shape& shape : shapes)
    for (CachePolicy c : kAllCachePolicies) {
      test::Problem pr = test::make_problem(shape.lens, 6, 2, 40, band_from_window(shape.w, WindowConvention::keys_including_self),
                                            DType::fp16, 31, 2.0);
      test::add_sinks(pr, 32);
      const auto dense = golden::attention_dense(pr.params);
      pr.params.mode = shape.s.mode;
      pr.params.chunk = shape.s.chunk;
      pr.params.decode_steps = shape.s.decode_steps;
      pr.params.cache = c;
      if (c == CachePolicy::paged) test::use_paged_cache(pr, 3, 33);
      const auto sched = golden::attention_scheduled(pr.params);
      BOOST_TEST((sched.out == dense.out), describe(pr, shape.w, shape.s, c));
      BOOST_TEST((sched.lse == dense.lse), describe(pr, shape.w, shape.s, c));
    }
}

BOOST_AUTO_TEST_CASE(ring_slot_arithmetic_matches_the_cache_model) {
  const int D = 2;
  for (CachePolicy policy : {CachePolicy::ring_modulo, CachePolicy::ring_compact})
    for (std::int64_t first_write : {1, 3, 5, 9, 14}) {
      const std::int64_t window = 5;
      KvCacheModel cache(policy, window, 0, 1, D);
      std::vector<double> kv(100 * D);
      for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<double>(i);
      cache.write(0, first_write, kv.data(), kv.data(), D);
      for (std::int64_t pos = first_write; pos < 30; ++pos) {
        const RingGeometry g = cache.geometry();
        BOOST_TEST(g.base == (policy == CachePolicy::ring_compact ? compact_ring_base(first_write, window) : 0));
        for (std::int64_t slot = 0; slot < window; ++slot) {
          BOOST_TEST(ring_slot_position(g, slot, pos - 1) == cache.position(slot));
          if (cache.position(slot) >= 0) BOOST_TEST(cache.key(slot, 0)[0] == static_cast<double>(cache.position(slot) * D));
        }
        cache.write(pos, 1, &kv[pos * D], &kv[pos * D], D);
      }
    }
}

BOOST_AUTO_TEST_CASE(compact_prefill_keeps_its_last_w_tokens_in_order) {
  // The patent: a first input of k > N tokens caches its last N tokens at slots 0..N-1.
  KvCacheModel cache(CachePolicy::ring_compact, 4, 0, 1, 1);
  std::vector<double> kv = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  cache.write(0, 9, kv.data(), kv.data(), 1);
  for (int s = 0; s < 4; ++s) BOOST_TEST(cache.position(s) == 5 + s);
  cache.write(9, 1, &kv[9], &kv[9], 1);  // next token: (last index + 1) mod N = 0
  BOOST_TEST(cache.position(0) == 9);
  // The modulo ring holds the same tokens in other slots.
  KvCacheModel modulo(CachePolicy::ring_modulo, 4, 0, 1, 1);
  modulo.write(0, 9, kv.data(), kv.data(), 1);
  BOOST_TEST(modulo.position(0) == 8);
  BOOST_TEST(modulo.position(1) == 5);
}

BOOST_AUTO_TEST_CASE(cache_bytes_ring_fixed_linear_grows) {
  const auto ring4k = kv_cache_bytes(CachePolicy::ring_modulo, 4096, 4096, 8, 128, DType::fp16);
  const auto ring32k = kv_cache_bytes(CachePolicy::ring_modulo, 4096, 32768, 8, 128, DType::fp16);
  const auto lin32k = kv_cache_bytes(CachePolicy::linear, 4096, 32768, 8, 128, DType::fp16);
  BOOST_TEST(ring4k == ring32k);
  BOOST_TEST(ring4k == 2 * 4096 * 8 * 128 * 2);
  BOOST_TEST(lin32k == 8 * ring32k);  // Mistral: 8x less cache memory at 32k context with W = 4096
  // Paged: the window's pages. Context 32768 with W 4096 and pages of 16: positions 28672..32767,
  // exactly 256 pages; one more position straddles a page more.
  BOOST_TEST(kv_cache_bytes(CachePolicy::paged, 4096, 32768, 8, 128, DType::fp16, KvFormat::dtype, 16) == ring32k);
  BOOST_TEST(kv_cache_bytes(CachePolicy::paged, 4096, 32769, 8, 128, DType::fp16, KvFormat::dtype, 16) ==
             ring32k + 2 * 16 * 8 * 128 * 2);
  BOOST_TEST(kv_cache_bytes(CachePolicy::paged, 0, 100, 1, 1, DType::fp16, KvFormat::dtype, 16) == 2 * 112 * 2);
}

BOOST_AUTO_TEST_CASE(invalid_schedules_are_refused) {
  test::Problem pr = test::make_problem({10}, 2, 2, 8, causal_band(), DType::fp32, 1);
  pr.params.mode = RunMode::chunked_prefill;
  pr.params.chunk = 4;
  pr.params.cache = CachePolicy::ring_modulo;
  BOOST_CHECK_THROW(golden::attention_scheduled(pr.params), std::invalid_argument);  // ring needs a window
  pr.params.cache = CachePolicy::linear;
  BOOST_CHECK_NO_THROW(golden::attention_scheduled(pr.params));
  pr.params.mode = RunMode::decode;
  pr.params.decode_steps = 10;  // leaves no prompt
  BOOST_CHECK_THROW(golden::attention_scheduled(pr.params), std::invalid_argument);
  pr.params.heads_kv = 3;
  BOOST_CHECK_THROW(golden::attention_dense(pr.params), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(any_thread_count_gives_the_same_bits) {
  // Blocks of 16 query rows, tiles of 16 keys and P.V blocks at multiples of 16 in key numbering:
  // ragged lengths, GQA, a window wider than a tile, and a causal row range that grows past it.
  const test::Problem dense = test::make_problem({203, 17, 90}, 8, 2, 72, {100, 0}, DType::bf16, 21);
  const test::Problem causal = test::make_problem({150}, 4, 4, 40, causal_band(), DType::fp32, 22);
  test::Problem decode = test::make_problem({120, 61}, 4, 2, 64, {30, 0}, DType::fp16, 23);
  decode.params.mode = RunMode::decode;
  decode.params.decode_steps = 9;
  decode.params.chunk = 16;
  const int max_threads = omp_get_max_threads();
  for (const test::Problem* pr : std::initializer_list<const test::Problem*>{&dense, &causal, &decode}) {
    omp_set_num_threads(1);
    const golden::Output one = golden::run(pr->params);
    for (int threads : {2, 3, 5}) {
      omp_set_num_threads(threads);
      const golden::Output many = golden::run(pr->params);
      BOOST_TEST((many.out == one.out), threads << " threads changed the output bits");
      BOOST_TEST((many.lse == one.lse), threads << " threads changed the LSE bits");
    }
  }
  omp_set_num_threads(max_threads);
}
