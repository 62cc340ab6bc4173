#define BOOST_TEST_MODULE dut_mutants
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <random>

#include "swa/dut/baseline_dut.hpp"
#include "swa/dut/mutant_dut.hpp"
#include "dut_case.hpp"

using namespace swa;
using namespace swa::dut;

namespace {

using test::Case;
using test::make_case;

double max_error(Case& c, Fault fault) {
  auto dut = make_mutant(fault);
  return test::relative_error(*dut, c);
}

}  // namespace

BOOST_AUTO_TEST_CASE(fault_free_kernels_match_the_golden_through_every_schedule) {
  // The controls, and a cache fault whose outputs are right by construction (only the harness's
  // cache check sees it).
  for (Fault f : {Fault::none, Fault::none_reversed, Fault::cache_slot_shifted}) {
    for (CachePolicy cache : kAllCachePolicies) {
      Case chunked = make_case({37, 1, 20}, 4, 2, 16, 6, RunMode::chunked_prefill, cache, 7, 0);
      BOOST_TEST(max_error(chunked, f) < 1e-5, fault_name(f) << " " << cache_name(cache));
      Case decode = make_case({30, 12}, 4, 2, 16, 6, RunMode::decode, cache, 5, 9);
      BOOST_TEST(max_error(decode, f) < 1e-5, fault_name(f) << " " << cache_name(cache));
    }
    Case prefill = make_case({25, 3}, 4, 1, 24, 5, RunMode::prefill, CachePolicy::ring_modulo, 0, 0);
    BOOST_TEST(max_error(prefill, f) < 1e-5, fault_name(f));
  }
  // The controls through soft-cap, sinks and a two-sided window.
  for (Fault f : {Fault::none, Fault::none_reversed}) {
    Case capped = make_case({37, 1, 20}, 4, 2, 16, 6, RunMode::chunked_prefill, CachePolicy::ring_modulo, 7, 0,
                            DType::fp32, 3.0);
    BOOST_TEST(max_error(test::with_semantics(capped, 5.f, true), f) < 1e-5, fault_name(f) << " cap+sinks");
    Case decode = make_case({30, 12}, 4, 2, 16, 6, RunMode::decode, CachePolicy::linear, 5, 9);
    BOOST_TEST(max_error(test::with_semantics(decode, 0.f, true), f) < 1e-5, fault_name(f) << " decode sinks");
    Case two = make_case({25, 3}, 4, 1, 24, 5, RunMode::prefill, CachePolicy::ring_modulo, 0, 0);
    BOOST_TEST(max_error(test::with_semantics(two, 0.f, false, 3), f) < 1e-5, fault_name(f) << " two-sided");
  }
  BOOST_TEST(is_control(Fault::none_reversed));
  BOOST_TEST(!is_control(Fault::cache_slot_shifted));
}

BOOST_AUTO_TEST_CASE(fp8_kv_controls_pass_and_fp8_faults_are_seen) {
  for (KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2})
    for (CachePolicy cache : kAllCachePolicies) {
      auto chunked = [&] { return make_case({37, 1, 20}, 4, 2, 16, 6, RunMode::chunked_prefill, cache, 7, 0); };
      auto decode = [&] { return make_case({30, 12}, 4, 2, 16, 6, RunMode::decode, cache, 5, 9); };
      for (Fault control : {Fault::none, Fault::none_reversed}) {
        Case a = chunked(), b = decode();
        BOOST_TEST(max_error(test::with_fp8(a, f), control) < 1e-5, fault_name(control) << " " << kv_format_name(f));
        BOOST_TEST(max_error(test::with_fp8(b, f), control) < 1e-5, fault_name(control) << " " << kv_format_name(f));
      }
      // The default descales saturate some keys: without saturation they become NaN (e4m3) or inf.
      Case c = chunked(), d = decode();
      BOOST_TEST(max_error(test::with_fp8(c, f), Fault::fp8_no_saturation) == INFINITY, kv_format_name(f));
      BOOST_TEST(max_error(test::with_fp8(d, f), Fault::fp8_descale_twice) > 1e-2, kv_format_name(f));
    }
  // Harmless without FP8.
  Case plain = make_case({30, 12}, 4, 2, 16, 6, RunMode::decode, CachePolicy::ring_modulo, 5, 9);
  BOOST_TEST(max_error(plain, Fault::fp8_no_saturation) < 1e-5);
  Case plain2 = make_case({30, 12}, 4, 2, 16, 6, RunMode::decode, CachePolicy::ring_modulo, 5, 9);
  BOOST_TEST(max_error(plain2, Fault::fp8_descale_twice) < 1e-5);
}

BOOST_AUTO_TEST_CASE(precision_faults_move_the_output_by_about_their_lost_bits) {
  // fp32 loses 3 of 23 bits: the error grows past fp32 rounding, far below a real bug's.
  for (Fault f : {Fault::p_low_precision, Fault::scores_low_precision}) {
    Case c = make_case({60}, 4, 2, 32, 20, RunMode::prefill, CachePolicy::ring_modulo, 0, 0);
    const double e = max_error(c, f);
    BOOST_TEST((e > 1e-7 && e < 1e-4), fault_name(f) << " " << e);
  }
  // decode-only fp16 accumulation leaves the prompt as the control computes it.
  Case prompt_only = make_case({30, 12}, 4, 2, 16, 6, RunMode::chunked_prefill, CachePolicy::linear, 7, 0);
  BOOST_TEST(max_error(prompt_only, Fault::fp16_pv_decode_only) < 1e-5);
  Case decode = make_case({30, 12}, 4, 2, 16, 6, RunMode::decode, CachePolicy::linear, 7, 9);
  BOOST_TEST(max_error(decode, Fault::fp16_pv_decode_only) > 1e-5);
}

BOOST_AUTO_TEST_CASE(every_fault_changes_the_output_where_it_should) {
  auto prefill = [] { return make_case({40}, 8, 2, 16, 4, RunMode::prefill, CachePolicy::ring_modulo, 0, 0); };
  auto ring = [] { return make_case({40}, 4, 2, 16, 5, RunMode::chunked_prefill, CachePolicy::ring_modulo, 3, 0); };
  Case a = prefill(), b = prefill(), c = ring(), d = ring(), e = prefill(), f = prefill();
  BOOST_TEST(max_error(a, Fault::window_plus_one) > 1e-2);
  BOOST_TEST(max_error(b, Fault::window_minus_one) > 1e-2);
  BOOST_TEST(max_error(c, Fault::ring_slot_off_by_one) > 1e-2);
  BOOST_TEST(max_error(d, Fault::stale_slot_after_wrap) > 1e-2);
  BOOST_TEST(max_error(e, Fault::gqa_modulo_mapping) > 1e-2);
  BOOST_TEST(max_error(f, Fault::fp16_pv_accumulation) > 1e-5);
  Case big = make_case({20}, 2, 1, 64, 8, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::fp32, 30.0);
  BOOST_TEST(max_error(big, Fault::no_max_subtraction) == INFINITY);  // exp overflows: NaN
  // The score-semantics faults, each where its feature is on, and harmless where it is off.
  Case sinks = make_case({40}, 8, 2, 16, 4, RunMode::prefill, CachePolicy::ring_modulo, 0, 0);
  BOOST_TEST(max_error(test::with_semantics(sinks, 0.f, true), Fault::sink_in_numerator) > 1e-2);
  Case capped = make_case({40}, 4, 2, 16, 4, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::fp32, 3.0);
  BOOST_TEST(max_error(test::with_semantics(capped, 5.f, false), Fault::softcap_after_mask) > 1e-2);
  Case capped_decode = make_case({40}, 4, 2, 16, 4, RunMode::decode, CachePolicy::linear, 0, 10, DType::fp32, 3.0);
  BOOST_TEST(max_error(test::with_semantics(capped_decode, 5.f, false), Fault::softcap_after_mask) > 1e-2);
  Case two = make_case({40}, 4, 2, 16, 4, RunMode::prefill, CachePolicy::ring_modulo, 0, 0);
  BOOST_TEST(max_error(test::with_semantics(two, 0.f, false, 2), Fault::window_right_off_by_one) > 1e-2);
  for (Fault fault : {Fault::sink_in_numerator, Fault::softcap_after_mask, Fault::window_right_off_by_one}) {
    Case plain = make_case({40}, 4, 2, 16, 4, RunMode::prefill, CachePolicy::ring_modulo, 0, 0);
    BOOST_TEST(max_error(plain, fault) < 1e-5, fault_name(fault) << " without its feature");
  }
  // The linear cache has no slots to get wrong.
  Case linear = make_case({40}, 4, 2, 16, 5, RunMode::chunked_prefill, CachePolicy::linear, 3, 0);
  BOOST_TEST(max_error(linear, Fault::ring_slot_off_by_one) < 1e-5);
}

BOOST_AUTO_TEST_CASE(paged_faults_change_the_output_of_paged_caches_only) {
  // Page 4, W 6: every window spans a page boundary, and the batch of three recycles pages.
  auto decode = [](CachePolicy cache) {
    return make_case({30, 12, 21}, 4, 2, 16, 6, RunMode::decode, cache, 5, 9);
  };
  auto chunked = [](CachePolicy cache) {
    return make_case({37, 1, 20}, 4, 2, 16, 6, RunMode::chunked_prefill, cache, 7, 0);
  };
  for (Fault f : {Fault::page_table_off_by_one, Fault::page_freed_early, Fault::recycled_page_read}) {
    Case paged = decode(CachePolicy::paged);
    BOOST_TEST(max_error(paged, f) > 1e-2, fault_name(f) << " decode");
    for (CachePolicy other : {CachePolicy::ring_modulo, CachePolicy::linear}) {
      Case c = decode(other);
      BOOST_TEST(max_error(c, f) < 1e-5, fault_name(f) << " " << cache_name(other));
    }
  }
  for (Fault f : {Fault::page_table_off_by_one, Fault::page_freed_early}) {
    Case paged = chunked(CachePolicy::paged);
    BOOST_TEST(max_error(paged, f) > 1e-2, fault_name(f) << " chunked");
  }
  // A page per position: the off-by-one page is the next position's.
  Case single = decode(CachePolicy::paged);
  BOOST_TEST(max_error(test::with_pages(single, 1), Fault::page_table_off_by_one) > 1e-2);
}

BOOST_AUTO_TEST_CASE(baseline_dut_writes_every_row_under_any_schedule) {
  for (RunMode mode : kAllRunModes) {
    Case c = make_case({17, 9}, 2, 1, 8, 4, mode, CachePolicy::ring_compact, 5, mode == RunMode::decode ? 4 : 0);
    auto dut = make_baseline_dut();
    BOOST_TEST(test::relative_error(*dut, c) < 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(names_parse_back) {
  for (Fault f : kAllFaults) BOOST_TEST((parse_fault(fault_name(f)) == f));
  BOOST_TEST(!parse_fault("window_plus_two").has_value());
}
