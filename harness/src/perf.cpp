#include "swa/harness/perf.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "swa/kv_cache_model.hpp"

namespace swa::harness {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void require_ok(const dut::Status& s) {
  if (!s.ok) throw std::runtime_error(s.message);
}

}  // namespace

double measure_cpu_ceiling_gflops() {
  constexpr int n = 2048;
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  c.noalias() = a * b;  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    c.noalias() = a * b;
    ms.push_back(ms_since(t0));
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * n * n * static_cast<double>(n) / (ms[1] * 1e6);
}

PerfRow time_dut(const Scenario& s, const Problem& pr, dut::Dut& dut, const PerfSettings& settings, double ceiling) {
  const AttnParams& base = pr.params;
  std::vector<unsigned char> out(static_cast<std::size_t>(pr.seq_offsets.back()) * s.heads * s.head_size *
                                 dtype_bytes(s.dtype));
  AttnParams p = base;
  p.out = out.data();
  std::vector<double> ms;
  bool device_timed = true;
  // One entry point's time: the DUT's own kernel time when it has one, else the host's.
  auto timed = [&](auto&& call) {
    const auto t0 = Clock::now();
    require_ok(call());
    const double host = ms_since(t0);
    const std::optional<double> device = dut.last_kernel_ms();
    device_timed = device_timed && device.has_value();
    return device ? *device : host;
  };
  for (int r = 0; r < settings.warmups + settings.repeats; ++r) {
    double elapsed = 0;
    if (s.mode == RunMode::decode) {
      dut::KvCache cache = dut::make_kv_cache(p);
      for (int c = 0, n = dut::chunk_count(p); c < n; ++c) require_ok(dut.chunked_prefill(p, cache, c));
      for (int t = 0; t < p.decode_steps; ++t) elapsed += timed([&] { return dut.decode_step(p, cache, t); });
      elapsed /= p.decode_steps;
    } else if (s.mode == RunMode::chunked_prefill) {
      dut::KvCache cache = dut::make_kv_cache(p);
      for (int c = 0, n = dut::chunk_count(p); c < n; ++c)
        elapsed += timed([&] { return dut.chunked_prefill(p, cache, c); });
    } else {
      elapsed = timed([&] { return dut.prefill(p); });
    }
    if (r >= settings.warmups) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());

  PerfRow row;
  row.scenario_id = s.id();
  row.dut = dut.name();
  row.mode = mode_name(s.mode);
  row.dtype = dtype_name(s.dtype);
  row.cache = s.mode == RunMode::prefill ? "none" : cache_name(s.cache);
  row.tokens = s.tokens();
  row.window = s.window;
  row.head_size = s.head_size;
  row.heads = s.heads;
  row.kv_heads = s.kv_heads;
  row.batch = static_cast<std::int64_t>(s.prompt_lens.size());
  row.repeats = settings.repeats;
  row.timer = device_timed ? "device events" : "host wall clock";
  row.time_ms = ms[ms.size() / 2];
  row.min_ms = ms.front();
  row.max_ms = ms.back();
  const WindowBand band = base.band;
  for (int b = 0; b < base.batch; ++b) {
    const std::int64_t len = base.seq_lens[b];
    if (s.mode == RunMode::decode) {
      std::int64_t keys = 0;  // average per step
      for (std::int64_t i = len - s.decode_steps; i < len; ++i) keys += band_end_key(band, i, len) - band_first_key(band, i);
      row.pairs += keys / s.decode_steps;
      row.kv_bytes += kv_cache_bytes(s.cache, s.window, len, s.kv_heads, s.head_size, s.dtype);
    } else {
      row.pairs += band_pair_count(band, len);
      row.kv_bytes += s.mode == RunMode::prefill
                          ? 2 * len * s.kv_heads * s.head_size * static_cast<std::int64_t>(dtype_bytes(s.dtype))
                          : kv_cache_bytes(s.cache, s.window, len, s.kv_heads, s.head_size, s.dtype);
    }
  }
  row.gflops = 4.0 * s.head_size * static_cast<double>(row.pairs) * s.heads / (row.time_ms * 1e6);
  row.ceiling_gflops = ceiling;
  row.ceiling_fraction = ceiling > 0 ? row.gflops / ceiling : 0;
  row.ceiling = "Eigen SGEMM 2048^3, same run";
  return row;
}

}  // namespace swa::harness
