#define BOOST_TEST_MODULE golden_paging
// The paged KV cache (golden/README.md, "Paged KV cache"): any page size and pool order gives the
// dense result; pages are freed at the documented write and reused most recently freed first; a
// recycled page's old contents are never read.
#include <boost/test/unit_test.hpp>
#include <random>
#include <sstream>
#include <stdexcept>

#include "problem.hpp"
#include "swa/paged_kv_model.hpp"

using namespace swa;

namespace {

constexpr double kBound = 1e-13;  // both fp64 with compensated sums; only the visiting order differs

}  // namespace

BOOST_AUTO_TEST_CASE(any_page_size_and_pool_order_gives_the_dense_result) {
  std::mt19937_64 rng(2026);
  std::int64_t recycled = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 3);
    std::vector<std::int32_t> lens;
    for (int b = 0; b < batch; ++b) lens.push_back(static_cast<std::int32_t>(2 + rng() % 70));
    const int page_sizes[] = {1, 2, 3, 5, 8, 16, 64, 4096};
    const int page = page_sizes[rng() % 8];
    const std::int64_t w = static_cast<std::int64_t>(rng() % 24);  // 0: no window
    const WindowBand band = w > 0 ? band_from_window(w, WindowConvention::keys_including_self) : causal_band();
    const DType dt = trial % 2 ? DType::bf16 : DType::fp32;
    test::Problem pr = test::make_problem(lens, 4, 2, 16, band, dt, 100 + trial);
    const auto dense = golden::attention_dense(pr.params);
    AttnParams& p = pr.params;
    const bool decode = trial % 3 != 0;
    p.mode = decode ? RunMode::decode : RunMode::chunked_prefill;
    const std::int32_t shortest = *std::min_element(lens.begin(), lens.end());
    p.decode_steps = decode ? 1 + static_cast<int>(rng() % (shortest - 1)) : 0;
    p.chunk = static_cast<int>(rng() % 9) + (decode ? 0 : 1);  // decode: 0 = the whole prompt at once
    test::use_paged_cache(pr, page, rng(), static_cast<int>(rng() % 3));
    std::ostringstream what;
    what << "trial " << trial << " page " << page << " W " << w << " mode " << mode_name(p.mode) << " chunk "
         << p.chunk << " steps " << p.decode_steps << " batch " << batch;
    const auto paged = golden::attention_scheduled(p);
    BOOST_TEST(test::normwise_relative(paged.out, dense.out) <= kBound, what.str());
    BOOST_TEST(test::normwise_relative(paged.lse, dense.lse) <= kBound, what.str());
    PagedKvModel model(p);  // how much recycling the trials exercised
    const std::int64_t row = static_cast<std::int64_t>(p.heads_kv) * p.head_size;
    std::vector<double> zeros(static_cast<std::size_t>(pr.offsets.back()) * row, 1.0);
    for (int b = 0; b < batch; ++b)  // sequence by sequence: recycling within one sequence suffices here
      for_each_cache_write(p, b, [&](std::int64_t s, std::int64_t e, std::int64_t reader) {
        model.take(b, s, e, reader);
        model.store(b, s, e, &zeros[(pr.offsets[b] + s) * row], &zeros[(pr.offsets[b] + s) * row], row);
        model.release(b, e);
      });
    recycled += model.recycled_takes();
  }
  BOOST_TEST(recycled > 100, "the trials must reuse freed pages, got " << recycled << " recycled takes");
}

// W = 4 (left 3), pages of 2, sequences of 8 and 5 with 4 decode steps: prompts of 4 and 1 tokens in
// one chunk call, then steps 0..3, driven call by call as run_schedule does.
BOOST_AUTO_TEST_CASE(pages_are_freed_after_the_documented_call_and_reused_most_recent_first) {
  test::Problem pr = test::make_problem({8, 5}, 1, 1, 2, band_from_window(4, WindowConvention::keys_including_self),
                                        DType::fp32, 1);
  AttnParams& p = pr.params;
  p.mode = RunMode::decode;
  p.decode_steps = 4;
  test::use_paged_cache(pr, 2, 9);
  // Each sequence holds at most 3 pages at once (sequence 0: positions 0..4 during step 0).
  BOOST_TEST(p.pool_pages == 6);
  PagedKvModel m(p);
  std::vector<double> kv(26, 0.5);
  auto page = [&](int b, std::int64_t logical) { return m.physical_page(b, logical); };
  auto call = [&](std::int64_t s0, std::int64_t e0, std::int64_t r0, std::int64_t s1, std::int64_t e1, std::int64_t r1) {
    m.take(0, s0, e0, r0);
    m.take(1, s1, e1, r1);
    m.store(0, s0, e0, kv.data(), kv.data(), 2);
    m.store(1, s1, e1, kv.data(), kv.data(), 2);
    m.release(0, e0);
    m.release(1, e1);
  };
  call(0, 4, 4, 0, 1, 1);  // the prompts; query 4 sees 1..4, so nothing is dead
  BOOST_TEST(page(0, 0) == pr.page_order[0]);
  BOOST_TEST(page(0, 1) == pr.page_order[1]);
  BOOST_TEST(page(1, 0) == pr.page_order[2]);
  const std::int32_t first = page(0, 0);
  call(4, 5, 4, 1, 2, 1);  // step 0: position 4 takes a new page; afterwards query 5 sees 2..5: page 0 freed
  BOOST_TEST(page(0, 2) == pr.page_order[3]);
  BOOST_TEST(page(0, 0) == -1);
  BOOST_TEST(!m.holds(0, 1));
  BOOST_TEST(m.holds(0, 2));
  BOOST_CHECK_THROW(m.key(0, 1, 0), std::logic_error);
  BOOST_TEST(m.recycled_takes() == 0);
  call(5, 6, 5, 2, 3, 2);  // step 1: sequence 1's position 2 needs a page: the one freed, before never-used ones
  BOOST_TEST(page(1, 1) == first);
  BOOST_TEST(m.recycled_takes() == 1);
  BOOST_TEST(m.holds(1, 2));
  BOOST_TEST(!m.holds(1, 3));  // the recycled page's other slot is not written yet
}

BOOST_AUTO_TEST_CASE(recycled_pages_are_never_read_before_they_are_written) {
  // Poison: sequence 0's keys are huge, so a query of sequence 1 reading one of them through a
  // recycled page would swing its output far beyond the bound; windows of one page keep recycling.
  for (int page : {1, 2, 4}) {
    test::Problem pr = test::make_problem({48, 48, 48}, 2, 1, 8, band_from_window(3, WindowConvention::keys_including_self),
                                          DType::fp32, 77);
    auto* k = reinterpret_cast<float*>(pr.k.data());
    for (std::int64_t i = 0; i < 48 * 8; ++i) k[i] *= 64.f;
    const auto dense = golden::attention_dense(pr.params);
    AttnParams& p = pr.params;
    p.mode = RunMode::decode;
    p.decode_steps = 40;
    p.chunk = 3;
    test::use_paged_cache(pr, page, 3);
    const auto paged = golden::attention_scheduled(p);
    BOOST_TEST(test::normwise_relative(paged.out, dense.out) <= kBound, "page " << page);
  }
}

BOOST_AUTO_TEST_CASE(paging_fields_are_validated_by_name) {
  test::Problem pr = test::make_problem({20}, 1, 1, 4, band_from_window(4, WindowConvention::keys_including_self),
                                        DType::fp32, 1);
  AttnParams& p = pr.params;
  p.mode = RunMode::chunked_prefill;
  p.chunk = 5;
  test::use_paged_cache(pr, 4, 1);
  BOOST_CHECK_NO_THROW(validate(p));
  auto message = [&](AttnParams q) {
    try {
      validate(q);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  AttnParams q = p;
  q.page_size = 0;
  BOOST_TEST(message(q).find("page_size must be 1..4096") != std::string::npos, message(q));
  q.page_size = 4097;
  BOOST_TEST(message(q).find("page_size") != std::string::npos);
  q = p;
  q.pool_pages -= 1;
  BOOST_TEST(message(q).find("pool_pages must be >=") != std::string::npos, message(q));
  std::vector<std::int32_t> bad(pr.page_order);
  bad[0] = bad[1];
  q = p;
  q.page_order = bad.data();
  BOOST_TEST(message(q).find("page_order must be a permutation") != std::string::npos, message(q));
}
