#include "swa/harness/run/perf.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/base/timing.hpp"
#include "swa/kv_cache_model.hpp"

namespace swa::harness {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void require_ok(const dut::Status& s) {
  if (!s.ok) throw std::runtime_error(s.message);
}

}  // namespace

namespace {

// Whose clock timed a row's calls: the DUT's own (a kernel time it reported for that call), or the
// host's wall clock (every call it reported none for), counted over the warm-ups and repeats.
struct Clocks {
  long own = 0, host = 0;
  void count(bool reported) { ++(reported ? own : host); }
  std::string label() const {
    if (own == 0) return "host wall clock";
    if (host == 0) return "DUT's own timing";
    return "mixed: DUT's own timing in " + std::to_string(own) + " of " + std::to_string(own + host) +
           " calls, host wall clock in the rest";
  }
};

// Times each call of a schedule as run_schedule drives it: the DUT's own kernel time when it reports
// one for that call, else the host's time since the previous call ended.
class CallTimer final : public dut::ScheduleObserver {
 public:
  // counting_chunks false (decode): the prompt's chunks are not the row's time, nor its clocks.
  CallTimer(const dut::Dut& dut, Clocks& clocks, bool counting_chunks)
      : dut_(dut), clocks_(clocks), counting_chunks_(counting_chunks), last_(Clock::now()) {}
  void after_chunk(const AttnParams&, const dut::KvCache&, int) override { chunk_ms.push_back(lap(counting_chunks_)); }
  void after_decode_step(const AttnParams&, const dut::KvCache&, int) override { step_ms.push_back(lap(true)); }

  std::vector<double> chunk_ms, step_ms;

 private:
  double lap(bool counted) {
    const double host = ms_since(last_);
    const std::optional<double> device = dut_.last_kernel_ms();
    if (counted) clocks_.count(device.has_value());
    last_ = Clock::now();
    return device ? *device : host;
  }
  const dut::Dut& dut_;
  Clocks& clocks_;
  bool counting_chunks_;
  Clock::time_point last_;
};

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

}  // namespace

PerfRow time_dut(const Scenario& s, const Problem& pr, dut::Dut& dut, const PerfSettings& settings, double ceiling) {
  const AttnParams& base = pr.params;
  if (s.mode == RunMode::decode && dut.traits().whole_schedule_per_call)
    throw std::runtime_error(dut.name() + " runs the whole schedule in one call, so its decode steps cannot be timed "
                             "one by one; perf mode times such DUTs in prefill and chunked_prefill only");
  std::vector<unsigned char> out(static_cast<std::size_t>(pr.seq_offsets.back()) * s.heads * s.head_size *
                                 dtype_bytes(s.dtype));
  AttnParams p = base;
  p.out = out.data();
  Clocks clocks;
  const Timing timing = time_reported([&] {
    // Through run_schedule, as every run: decode is timed per step (its prompt chunks untimed),
    // chunked prefill as the sum of its chunks, prefill as the whole call.
    CallTimer timer(dut, clocks, s.mode != RunMode::decode);
    const auto t0 = Clock::now();
    require_ok(dut::run_schedule(dut, p, &timer));
    const double whole = ms_since(t0);
    double elapsed = 0;
    if (s.mode == RunMode::decode) {
      elapsed = sum(timer.step_ms) / p.decode_steps;
    } else if (s.mode == RunMode::chunked_prefill) {
      elapsed = sum(timer.chunk_ms);
    } else {
      const std::optional<double> device = dut.last_kernel_ms();
      clocks.count(device.has_value());
      elapsed = device ? *device : whole;
    }
    return elapsed;
  }, settings.warmups, settings.repeats);

  PerfRow row;
  row.scenario_id = s.id();
  row.dut = dut.name();
  row.dut_label = dut_label(row.dut);
  row.mode = mode_name(s.mode);
  row.dtype = dtype_name(s.dtype);
  row.cache = s.mode == RunMode::prefill ? "none" : cache_name(s.cache);
  row.tokens = s.tokens();
  row.window = s.window;
  row.head_size = s.head_size;
  row.heads = s.heads;
  row.kv_heads = s.kv_heads;
  row.batch = static_cast<std::int64_t>(s.prompt_lens.size());
  row.timer = clocks.label();
  row.set_timing(timing);
  const WindowBand band = base.band;
  for (int b = 0; b < base.batch; ++b) {
    const std::int64_t len = base.seq_lens[b];
    if (s.mode == RunMode::decode) {
      std::int64_t keys = 0;  // average per step
      for (std::int64_t i = len - s.decode_steps; i < len; ++i) keys += band_end_key(band, i, len) - band_first_key(band, i);
      row.pairs += keys / s.decode_steps;
      row.kv_bytes += kv_cache_bytes(s.cache, s.window, len, s.kv_heads, s.head_size, s.dtype, s.kv_dtype, s.page_size);
    } else {
      row.pairs += band_pair_count(band, len);
      row.kv_bytes += s.mode == RunMode::prefill
                          ? 2 * len * s.kv_heads * s.head_size * static_cast<std::int64_t>(dtype_bytes(s.dtype))
                          : kv_cache_bytes(s.cache, s.window, len, s.kv_heads, s.head_size, s.dtype, s.kv_dtype,
                                           s.page_size);
    }
  }
  row.gflops = attention_gflops(s.head_size, row.pairs, s.heads, row.time_ms);
  row.set_ceiling(ceiling, "SGEMM 2048^3, " + cpu_sgemm_name() + ", same run");
  return row;
}

}  // namespace swa::harness
