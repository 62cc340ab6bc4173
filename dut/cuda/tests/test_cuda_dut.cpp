// The CUDA DUT on a GPU, against the golden and the CPU DUT. Without a usable device it prints
// "skipped: no CUDA device" and exits 77, which CTest reports as skipped, never as passed.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>
#include <iostream>

#include "swa/dut/cpu_dut.hpp"
#include "dut_case.hpp"
#include "swa/dut/cuda_dut.hpp"

using namespace swa;
using namespace swa::dut;
using test::Case;
using test::make_case;
using test::error_bound;
using test::masked_case;

namespace {

std::string cuda_verdict(Case& c) {
  auto dut = make_cuda_dut();
  BOOST_REQUIRE(dut->supports(c.p).run);
  return test::verdict(*dut, c);
}

double cuda_error(Case& c) {
  auto dut = make_cuda_dut();
  BOOST_REQUIRE(dut->supports(c.p).run);
  return test::relative_error(*dut, c);
}

// max |a - b| / max |b| of two DUT outputs of the same case.
double difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    ref = std::max(ref, std::abs(double(b[i])));
  }
  return worst / ref;
}

}  // namespace

// Small cases through every kernel (both prefill kernels, a ragged batch, chunked prefill through
// each cache, split decode, both masks): what compute-sanitizer memcheck and racecheck run on.
BOOST_AUTO_TEST_CASE(sanitizer_smoke) {
  for (DType dt : kAllDTypes) {
    Case pre = make_case({70, 1, 130}, 4, 2, 64, 40, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
    BOOST_TEST(cuda_verdict(pre) == "pass", "prefill " << dtype_name(dt));
    for (CachePolicy cache : kAllCachePolicies) {
      Case chunked = make_case({90, 33}, 4, 2, 64, 24, RunMode::chunked_prefill, cache, 30, 0, dt);
      BOOST_TEST(cuda_verdict(chunked) == "pass", "chunked " << cache_name(cache) << " " << dtype_name(dt));
      Case dec = make_case({300, 40}, 4, 1, 64, 200, RunMode::decode, cache, 64, 6, dt);
      BOOST_TEST(cuda_verdict(dec) == "pass", "decode " << cache_name(cache) << " " << dtype_name(dt));
    }
  }
  std::vector<float> mask;
  for (MaskFormat f : {MaskFormat::swa_norm, MaskFormat::swa_compress}) {
    Case c = masked_case(f, mask, 129, 64);
    BOOST_TEST(cuda_verdict(c) == "pass", mask_format_name(f));
  }
}

BOOST_AUTO_TEST_CASE(prefill_every_head_size_and_dtype) {
  for (int d : {64, 80, 96, 128, 160, 192, 256})
    for (DType dt : kAllDTypes)
      for (std::int64_t w : {1, 17, 100, 1000}) {
        Case c = make_case({130, 1, 67, 200}, 8, 2, d, w, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
        BOOST_TEST(cuda_verdict(c) == "pass", "D=" << d << " " << dtype_name(dt) << " W=" << w);
      }
}

// The decode kernel's shared-memory layout depends on the row's bytes: one stage for fp32 rows at
// D >= 192, two otherwise; at D = 80 some lanes own no column pair.
BOOST_AUTO_TEST_CASE(decode_every_head_size_and_dtype) {
  for (int d : {64, 80, 96, 128, 160, 192, 256})
    for (DType dt : kAllDTypes)
      for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::linear}) {
        Case c = make_case({300, 45}, 8, 2, d, 100, RunMode::decode, cache, 64, 4, dt);
        BOOST_TEST(cuda_verdict(c) == "pass", "D=" << d << " " << dtype_name(dt) << " " << cache_name(cache));
      }
}

BOOST_AUTO_TEST_CASE(chunked_prefill_and_decode_through_every_cache) {
  for (CachePolicy cache : kAllCachePolicies)
    for (DType dt : kAllDTypes) {
      Case c_gt_w = make_case({150, 1, 70}, 8, 2, 64, 20, RunMode::chunked_prefill, cache, 33, 0, dt);
      BOOST_TEST(cuda_verdict(c_gt_w) == "pass", cache_name(cache) << " C>W " << dtype_name(dt));
      Case c_lt_w = make_case({150, 9}, 8, 2, 128, 20, RunMode::chunked_prefill, cache, 7, 0, dt);
      BOOST_TEST(cuda_verdict(c_lt_w) == "pass", cache_name(cache) << " C<W " << dtype_name(dt));
      Case c_eq_w = make_case({80}, 4, 4, 80, 20, RunMode::chunked_prefill, cache, 20, 0, dt);
      BOOST_TEST(cuda_verdict(c_eq_w) == "pass", cache_name(cache) << " C=W " << dtype_name(dt));
      Case dec = make_case({600, 30, 27}, 8, 2, 128, 160, RunMode::decode, cache, 90, 25, dt);
      BOOST_TEST(cuda_verdict(dec) == "pass", cache_name(cache) << " decode " << dtype_name(dt));
    }
}

BOOST_AUTO_TEST_CASE(cpu_and_cuda_agree_on_the_same_inputs) {
  for (RunMode mode : kAllRunModes)
    for (DType dt : kAllDTypes) {
      Case on_cpu = make_case({300, 77}, 8, 2, 128, 64, mode, CachePolicy::ring_compact, 40, mode == RunMode::decode ? 30 : 0, dt);
      Case on_gpu = on_cpu;
      on_gpu.p.q = on_gpu.q.data();
      on_gpu.p.k = on_gpu.k.data();
      on_gpu.p.v = on_gpu.v.data();
      on_gpu.p.out = on_gpu.out.data();
      on_gpu.p.seq_lens = on_gpu.lens.data();
      on_gpu.p.seq_offsets = on_gpu.offsets.data();
      auto cpu = make_cpu_dut();
      auto gpu = make_cuda_dut();
      BOOST_REQUIRE(run_schedule(*cpu, on_cpu.p).ok);
      const Status s = run_schedule(*gpu, on_gpu.p);
      BOOST_REQUIRE_MESSAGE(s.ok, s.message);
      BOOST_TEST(difference(on_gpu.output(), on_cpu.output()) < 2 * error_bound(dt), mode_name(mode) << " " << dtype_name(dt));
    }
}

// FlashAttention's race test: the same inputs give the same bits, run after run.
BOOST_AUTO_TEST_CASE(fp8_kv_through_every_kernel_and_cache) {
  // The FP8 paths of the prefill kernels (quantising their inputs), the cache write (quantising),
  // chunked prefill and split decode (decoding codes); the harness's cache check compares the codes.
  for (KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2})
    for (DType dt : kAllDTypes) {
      Case pre = make_case({130, 1, 67}, 4, 2, 128, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
      BOOST_TEST(cuda_verdict(test::with_fp8(pre, f)) == "pass", kv_format_name(f) << " prefill " << dtype_name(dt));
      for (CachePolicy cache : kAllCachePolicies) {
        Case chunked = make_case({150, 9}, 8, 2, 64, 20, RunMode::chunked_prefill, cache, 7, 0, dt);
        BOOST_TEST(cuda_verdict(test::with_fp8(chunked, f)) == "pass",
                   kv_format_name(f) << " chunked " << cache_name(cache) << " " << dtype_name(dt));
        Case dec = make_case({760, 40, 530}, 8, 2, 128, 300, RunMode::decode, cache, 97, 6, dt);
        BOOST_TEST(cuda_verdict(test::with_fp8(dec, f)) == "pass",
                   kv_format_name(f) << " decode " << cache_name(cache) << " " << dtype_name(dt));
      }
    }
}

BOOST_AUTO_TEST_CASE(fifty_reruns_are_bit_identical) {
  for (RunMode mode : kAllRunModes) {
    std::vector<float> first;
    auto dut = make_cuda_dut();
    for (int run = 0; run < 50; ++run) {
      Case c = make_case({513, 64}, 8, 2, 128, 200, mode, CachePolicy::ring_modulo, 100, mode == RunMode::decode ? 20 : 0,
                         DType::bf16);
      BOOST_REQUIRE(run_schedule(*dut, c.p).ok);
      if (run == 0) first = c.output();
      else if (c.output() != first) {
        BOOST_TEST(false, mode_name(mode) << " run " << run << " differs from run 0");
        break;
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(masks_are_read_not_assumed) {
  for (std::int64_t w : {129, 300}) {
    std::vector<float> mask;
    for (MaskFormat f : {MaskFormat::swa_norm, MaskFormat::swa_compress}) {
      Case c = masked_case(f, mask, w, 128);
      BOOST_TEST(cuda_verdict(c) == "pass", mask_format_name(f) << " W=" << w);
      Case broken = masked_case(f, mask, w, 128);
      const std::int64_t row = f == MaskFormat::swa_norm ? 650 : 100, col = f == MaskFormat::swa_norm ? 649 : 50;
      mask[row * broken.p.mask_rows + col] = -65536.f;
      BOOST_TEST(cuda_error(broken) > 1e-3, mask_format_name(f) << " corrupted W=" << w);
    }
  }
}

BOOST_AUTO_TEST_CASE(errors_are_statuses_and_unsupported_cases_are_skips) {
  Case odd = make_case({10}, 2, 1, 72, 4, RunMode::prefill, CachePolicy::ring_modulo, 0, 0);
  const Support s = make_cuda_dut()->supports(odd.p);
  BOOST_TEST(!s.run);
  BOOST_TEST(s.skip_reason.find("head size 72") != std::string::npos);
  // A cache that lost the window's positions: a failure with the reason, and the DUT still works.
  Case c = make_case({50}, 2, 1, 64, 20, RunMode::chunked_prefill, CachePolicy::ring_modulo, 10, 0);
  auto dut = make_cuda_dut();
  KvCache empty = make_kv_cache(c.p);
  const Status lost = dut->chunked_prefill(c.p, empty, 2);
  BOOST_TEST(!lost.ok);
  BOOST_TEST(lost.message.find("does not hold position") != std::string::npos);
  BOOST_TEST(test::verdict(*dut, c) == "pass");
}

BOOST_AUTO_TEST_CASE(kernel_time_is_reported) {
  Case c = make_case({256}, 4, 2, 64, 64, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::fp16);
  auto dut = make_cuda_dut();
  BOOST_REQUIRE(dut->prefill(c.p).ok);
  BOOST_TEST(dut->last_kernel_ms().has_value());
  BOOST_TEST(*dut->last_kernel_ms() > 0.0);
}

bool init_unit_test() { return true; }

int main(int argc, char* argv[]) {
  if (const std::string problem = cuda_device_problem(); !problem.empty()) {
    std::cout << "skipped: no CUDA device (" << problem << ")\n";
    return 77;
  }
  std::cout << "device: " << cuda_device_description() << "\n";
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
