#include "cases.hpp"

#include <optional>
#include <random>
#include <stdexcept>

#include "dense_masked.hpp"
#include "swa/dut/kv_cache.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/kv_cache_model.hpp"

namespace swa::bench {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {

harness::ProblemSpec spec_for(DType dtype, const Shape& shape, std::int64_t tokens) {
  harness::ProblemSpec spec;
  spec.seq_lens.assign(shape.batch, static_cast<std::int32_t>(tokens));
  spec.heads_q = shape.hq;
  spec.heads_kv = shape.hkv;
  spec.head_size = shape.d;
  spec.band = shape.w > 0 ? band_from_window(shape.w, WindowConvention::keys_including_self) : causal_band();
  spec.dtype = dtype;
  spec.seed = 1;
  return spec;
}

// One DUT call per measurement: its own kernel time when it reports one, else the host clock.
// A failed call stops the benchmark: a timing of an error is no timing.
template <class Call>
Timing time_dut_calls(dut::Dut& dut, Call&& call, const BenchSettings& settings, std::string& timer) {
  bool device = true;
  const Timing t = time_reported(
      [&] {
        dut::Status status;
        const double host = host_ms([&] { status = call(); });
        if (!status.ok) throw std::runtime_error(dut.name() + ": " + status.message);
        const std::optional<double> kernels = dut.last_kernel_ms();
        device = device && kernels.has_value();
        return kernels ? *kernels : host;
      },
      settings.warmups, settings.repeats);
  timer = device ? "device events" : "host wall clock";
  return t;
}

}  // namespace

PerfRow row_for(const std::string& case_name, const std::string& dut, DType dtype, const Shape& shape,
                 std::string_view mode, std::string_view cache) {
  PerfRow r;
  r.scenario_id = case_name;
  r.dut = dut;
  r.dtype = dtype_name(dtype);
  r.mode = mode;
  r.cache = cache;
  r.tokens = shape.s;
  r.window = shape.w > 0 ? shape.w : shape.s;
  r.head_size = shape.d;
  r.heads = shape.hq;
  r.kv_heads = shape.hkv;
  r.batch = shape.batch;
  return r;
}

PerfRow bench_prefill(const std::string& case_name, const std::string& dut_name, DType dtype, Shape shape,
                       const BenchSettings& settings) {
  harness::Problem pr;
  harness::build_problem(spec_for(dtype, shape, shape.s), pr);
  std::vector<unsigned char> out(static_cast<std::size_t>(shape.batch) * shape.s * shape.hq * shape.d * dtype_bytes(dtype));
  AttnParams p = pr.params;
  p.out = out.data();
  PerfRow r = row_for(case_name, dut_name, dtype, shape, "prefill", "none");
  if (dut_name == "dense-masked") {
    r.set_timing(time_median([&] { dense_masked_attention(p); }, settings.warmups, settings.repeats));
  } else {
    auto dut = harness::make_dut(dut_name);
    r.set_timing(time_dut_calls(*dut, [&] { return dut->prefill(p); }, settings, r.timer));
  }
  const std::int64_t pairs = band_pair_count(p.band, shape.s) * shape.batch;
  r.gflops = attention_gflops(shape.d, pairs, shape.hq, r.time_ms);
  r.kv_bytes = 2 * shape.batch * shape.s * shape.hkv * shape.d * static_cast<std::int64_t>(dtype_bytes(dtype));
  return r;
}

PerfRow bench_decode(const std::string& case_name, const std::string& dut_name, DType dtype, Shape shape,
                      CachePolicy cache, const BenchSettings& settings) {
  const int steps = settings.warmups + settings.repeats;
  const std::int64_t context = shape.s;
  // Q, K, V and the output exist only for the decode rows: sequence b's position i >= context is
  // buffer row offsets[b] + i, the offsets shifted down by the context the cache already holds.
  harness::Problem pr;
  harness::build_problem(spec_for(dtype, shape, steps), pr);
  std::vector<std::int32_t> lens(shape.batch, static_cast<std::int32_t>(context + steps));
  std::vector<std::int64_t> offsets(shape.batch + 1);
  for (int b = 0; b <= shape.batch; ++b) offsets[b] = pr.seq_offsets[b] - context;
  std::vector<unsigned char> out(static_cast<std::size_t>(shape.batch) * steps * shape.hq * shape.d * dtype_bytes(dtype));
  AttnParams p = pr.params;
  p.seq_lens = lens.data();
  p.seq_offsets = offsets.data();
  p.out = out.data();  // the shifted offsets place the decode rows at the start of every buffer
  p.mode = RunMode::decode;
  p.decode_steps = steps;
  p.cache = cache;
  std::vector<std::int32_t> page_order;
  if (cache == CachePolicy::paged) {
    p.page_size = kBenchPageSize;
    p.pool_pages = static_cast<int>(paged_pool_pages(p));
    page_order = harness::draw_page_order(7, p.pool_pages);
    p.page_order = page_order.data();
  }
  dut::KvCache kv = dut::make_kv_cache(p);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < kv.k.size() / dtype_bytes(dtype); ++i) {
    store_as(dtype, normal(rng), &kv.k[i * dtype_bytes(dtype)]);
    store_as(dtype, normal(rng), &kv.v[i * dtype_bytes(dtype)]);
  }
  for (int b = 0; b < shape.batch; ++b) {
    // The context as a prompt written at once would leave it: the window's pages, from the pool.
    if (kv.paged()) dut::take_pages(kv, b, pages_dead_before(p.band, context, p.page_size) * p.page_size, context);
    kv.tokens_written[b] = context;
  }
  auto dut = harness::make_dut(dut_name);
  int step = 0;
  PerfRow r = row_for(case_name, dut_name, dtype, shape, "decode", cache_name(cache));
  // A paged cache's page bookkeeping around each step, as run_schedule does (O(batch), timed too).
  r.set_timing(time_dut_calls(*dut, [&] {
    dut::take_call_pages(p, kv, RunMode::decode, step);
    dut::Status st = dut->decode_step(p, kv, step);
    dut::free_call_pages(p, kv, RunMode::decode, step++);
    return st;
  }, settings, r.timer));
  const std::int64_t keys = std::min<std::int64_t>(context + 1, shape.w > 0 ? shape.w : context + 1);
  r.gflops = attention_gflops(shape.d, keys * shape.batch, shape.hq, r.time_ms);
  r.kv_bytes = shape.batch * kv_cache_bytes(cache, shape.w, context, shape.hkv, shape.d, dtype, KvFormat::dtype,
                                            kBenchPageSize);
  return r;
}

}  // namespace swa::bench
