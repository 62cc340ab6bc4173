#include "swa/harness/runner.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <ostream>
#include <sstream>
#include <thread>

#include "swa/baseline.hpp"
#include "swa/golden.hpp"
#include "swa/harness/cache_check.hpp"
#include "swa/harness/dut_registry.hpp"
#include "swa/harness/metrics.hpp"
#include "swa/harness/perf.hpp"
#include "swa/harness/verdict.hpp"

namespace swa::harness {
namespace {

std::vector<float> read_output(const std::vector<unsigned char>& storage, DType dtype) {
  std::vector<float> out(storage.size() / dtype_bytes(dtype));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_from(dtype, &storage[i * dtype_bytes(dtype)]);
  return out;
}

ResultRow non_result(const Scenario& s, const std::string& dut, const std::string& status, const std::string& reason) {
  ResultRow r;
  r.scenario_id = s.id();
  r.dut = dut;
  r.dtype = dtype_name(s.dtype);
  r.mode = mode_name(s.mode);
  r.status = status;
  r.reason = reason;
  r.rtol_factor = s.tolerance.rtol_factor;
  r.atol_floor = s.tolerance.atol_floor;
  r.profile = profile_name(s.tolerance.profile);
  return r;
}

// The cache is part of the contract: a DUT whose cache differs from the golden model fails even
// when its outputs are right (a consistent off-by-one slot is still wrong for the next kernel).
void judge_cache(ResultRow& r, const CacheChecker& checker) {
  r.cache_mismatches = checker.mismatches();
  if (checker.mismatches() == 0) return;
  if (!is_failure(r.status)) r.status = verdict_name(Verdict::fail);
  r.reason += (r.reason.empty() ? "" : "; ") + std::string("KV cache differs from the golden cache model in ") +
              std::to_string(checker.mismatches()) + " places, first " + checker.first_mismatch() +
              " (cache_check: false or --no-cache-check for a private cache layout)";
}

}  // namespace

std::vector<ResultRow> run_scenario(const Scenario& s, const std::vector<std::string>& duts, ResultsStore& store,
                                    const RunOptions& options) {
  const DumpPolicy dump_policy = options.dump;
  const std::optional<PerfSettings> perf = options.perf ? options.perf : s.perf;
  std::vector<std::string> todo;
  for (const auto& d : duts)
    if (!store.done(s.id(), d)) todo.push_back(d);
  if (todo.empty()) return {};

  Problem pr;
  build_problem(s.problem_spec(), pr);
  const golden::Output g = golden::run(pr.params);
  const std::vector<float> base_out = baseline::attention(pr.params);

  const Tolerance tolerance = options.profile ? tolerance_for(*options.profile, s.dtype) : s.tolerance;
  std::vector<ResultRow> rows;
  std::vector<PerfRow> perf_rows;
  std::optional<Dump> dump;
  auto dump_add = [&](int index, const std::string& name, std::vector<float> out) {
    if (!dump) {
      dump.emplace();
      dump->scenario_id = s.id();
      dump->seq_lens = pr.spec.seq_lens;
      dump->tokens = pr.seq_offsets.back();
      dump->heads_q = s.heads;
      dump->heads_kv = s.kv_heads;
      dump->head_size = s.head_size;
      dump->q = pr.q;
      dump->k = pr.k;
      dump->v = pr.v;
      dump->golden = g.out;
      dump->baseline = base_out;
      dump->attributes = {{"mode", std::string(mode_name(s.mode))}, {"dtype", std::string(dtype_name(s.dtype))},
                          {"window", std::to_string(s.window)}, {"scale", std::to_string(pr.params.scale)}};
    }
    dump->duts.push_back({index, name, std::move(out)});
  };

  // Never compare on zeros: the reference and the inputs must carry signal.
  if (std::all_of(g.out.begin(), g.out.end(), [](double x) { return x == 0.0; })) {
    for (const auto& d : todo) rows.push_back(non_result(s, d, "error", "the golden output is all zeros: refusing to compare"));
    return store.add(scenario_row(s), rows, {}, std::nullopt);
  }

  for (const auto& name : todo) {
    const int index = static_cast<int>(std::find(duts.begin(), duts.end(), name) - duts.begin());
    std::unique_ptr<dut::Dut> dut;
    try {
      dut = make_dut(name);
    } catch (const std::exception& e) {
      rows.push_back(non_result(s, name, "error", e.what()));
      continue;
    }
    const dut::Support support = dut->supports(pr.params);
    if (!support.run) {
      rows.push_back(non_result(s, name, "skip", support.skip_reason));
      continue;
    }
    std::vector<unsigned char> out_storage(g.out.size() * dtype_bytes(s.dtype));
    for (std::size_t i = 0; i < g.out.size(); ++i)
      store_as(s.dtype, std::numeric_limits<float>::quiet_NaN(), &out_storage[i * dtype_bytes(s.dtype)]);
    AttnParams p = pr.params;
    p.out = out_storage.data();
    std::optional<CacheChecker> cache_checker;
    if (options.cache_check && s.cache_check && s.mode != RunMode::prefill &&
        dut->cache_report() != dut::CacheReport::none)
      cache_checker.emplace(pr, dut->cache_report());
    const auto t0 = std::chrono::steady_clock::now();
    dut::Status status;
    try {
      status = dut::run_schedule(*dut, p, cache_checker ? &*cache_checker : nullptr);
    } catch (const std::exception& e) {
      status = dut::Status::failure(std::string("exception: ") + e.what());
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!status.ok) {
      rows.push_back(non_result(s, name, "error", status.message));
      rows.back().run_ms = ms;
      continue;
    }
    std::vector<float> out = read_output(out_storage, s.dtype);
    rows.push_back(judge(pr, tolerance, name, out, g.out, base_out));
    rows.back().scenario_id = s.id();
    rows.back().run_ms = ms;
    if (cache_checker) judge_cache(rows.back(), *cache_checker);
    if (dump_policy == DumpPolicy::all || rows.back().status != verdict_name(Verdict::pass)) dump_add(index, name, std::move(out));
    if (perf) try {
        perf_rows.push_back(time_dut(s, pr, *dut, *perf, options.ceiling_gflops));
      } catch (const std::exception& e) {
        rows.back().reason += (rows.back().reason.empty() ? "" : "; ") + std::string("perf run failed: ") + e.what();
      }
  }
  return store.add(scenario_row(s), rows, perf_rows, dump);
}

void run_scenarios(const std::vector<Scenario>& scenarios, ResultsStore& store, const RunOptions& options,
                   std::ostream& progress) {
  std::atomic<std::size_t> next{0};
  std::mutex log_mutex;
  std::size_t finished = 0;
  int failed = 0;
  const int jobs = std::max(1, options.jobs);
  const int threads_each = std::max(1, omp_get_num_procs() / jobs);
  auto worker = [&] {
    omp_set_num_threads(threads_each);
    for (std::size_t i; (i = next++) < scenarios.size();) {
      const Scenario& s = scenarios[i];
      const auto& duts = options.duts.empty() ? s.duts : options.duts;
      store.begin(s.id());
      std::vector<ResultRow> rows;
      try {
        rows = run_scenario(s, duts, store, options);
      } catch (const std::exception& e) {
        // Never let one scenario take the sweep down: its DUTs get error rows, the rest runs on.
        for (const auto& d : duts) rows.push_back(non_result(s, d, "error", std::string("harness: ") + e.what()));
        try {
          store.add(scenario_row(s), rows, {}, std::nullopt);
        } catch (const std::exception&) {
          // The results file itself cannot be written; the console still reports the rows.
        }
      }
      store.end(s.id());
      std::lock_guard lock(log_mutex);
      ++finished;
      std::string verdicts;
      for (const auto& r : rows) {
        verdicts += " " + r.dut + "=" + r.status;
        failed += is_failure(r.status);
      }
      if (options.progress_on_terminal) {
        progress << "\r\033[K[" << finished << "/" << scenarios.size() << "] " << failed << " failing  " << s.id()
                 << std::flush;
      } else {
        progress << "[" << finished << "/" << scenarios.size() << "] " << s.id()
                 << (rows.empty() ? " (already done)" : verdicts) << "\n";
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < jobs; ++j) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (options.progress_on_terminal) progress << "\n";
}

}  // namespace swa::harness
