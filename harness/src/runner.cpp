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
#include "swa/harness/dut_registry.hpp"
#include "swa/harness/metrics.hpp"
#include "swa/harness/perf.hpp"

namespace swa::harness {
namespace {

struct Location {
  std::int64_t seq = -1, token = -1, head = -1, dim = -1, window_edge = 0;
};

// Flat index of [nTokens, Hq, D] -> sequence, token position, head, dim. window_edge is the token's
// position relative to the first row whose window is full (t - (W - 1)): negative rows still see
// every earlier token, rows >= 1 are the first to lose a key to the window.
Location locate(const Problem& pr, const Scenario& s, std::int64_t flat) {
  Location l;
  if (flat < 0) return l;
  const std::int64_t row = flat / (static_cast<std::int64_t>(s.heads) * s.head_size);
  l.head = flat / s.head_size % s.heads;
  l.dim = flat % s.head_size;
  const auto it = std::upper_bound(pr.seq_offsets.begin(), pr.seq_offsets.end(), row);
  l.seq = (it - pr.seq_offsets.begin()) - 1;
  l.token = row - pr.seq_offsets[l.seq];
  l.window_edge = s.window > 0 ? l.token - (s.window - 1) : l.token;
  return l;
}

std::string describe(const Location& l) {
  std::ostringstream o;
  o << "seq " << l.seq << " token " << l.token << " head " << l.head << " dim " << l.dim;
  return o.str();
}

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
  return r;
}

ResultRow judge(const Scenario& s, const Problem& pr, const std::string& dut, const std::vector<float>& out,
                const golden::Output& g, const Comparison& base) {
  ResultRow r = non_result(s, dut, "", "");
  r.threshold = r.rtol_factor * base.max_abs + r.atol_floor;
  r.baseline_max_abs = base.max_abs;
  r.baseline_rel_l2 = base.rel_l2;
  r.baseline_mean_ulp = base.mean_ulp;
  const Comparison c = compare(out, g.out, s.dtype, r.threshold);
  r.max_abs = c.max_abs;
  r.max_rel = c.max_rel;
  r.rel_floor = c.rel_floor;
  r.mean_abs = c.mean_abs;
  r.rms = c.rms;
  r.rel_l2 = c.rel_l2;
  r.nmse = c.nmse;
  r.cosine = c.cosine;
  r.max_ulp = c.max_ulp;
  r.mean_ulp = c.mean_ulp;
  r.over_threshold = c.over_threshold;
  r.nan_count = c.nan_count;
  r.inf_count = c.inf_count;
  const Location worst = locate(pr, s, c.nan_count + c.inf_count > 0 ? c.first_nonfinite : c.worst_index);
  r.worst_seq = worst.seq;
  r.worst_token = worst.token;
  r.worst_head = worst.head;
  r.worst_dim = worst.dim;
  r.worst_window_edge = worst.window_edge;
  std::ostringstream why;
  if (c.nan_count + c.inf_count > 0) {
    r.status = "fail";
    why << c.nan_count << " NaN and " << c.inf_count << " Inf in the output, first at " << describe(worst)
        << " (NaN never passes; a NaN left by the poisoning is an element the DUT never wrote)";
  } else if (c.max_abs > r.threshold) {
    r.status = "fail";
    why << "max abs error " << c.max_abs << " at " << describe(worst) << " > threshold " << r.threshold << " = "
        << r.rtol_factor << " x baseline max abs error " << base.max_abs << " + atol floor " << r.atol_floor << "; "
        << c.over_threshold << " elements over";
  } else {
    r.status = "pass";
  }
  r.reason = why.str();
  return r;
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
  const Comparison base = compare(base_out, g.out, s.dtype, 0);

  std::vector<ResultRow> rows;
  std::vector<PerfRow> perf_rows;
  std::optional<Dump> dump;
  auto dump_add = [&](const std::string& name, std::vector<float> out) {
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
    dump->duts.emplace_back(name, std::move(out));
  };

  // Never compare on zeros: the reference and the inputs must carry signal.
  if (base.ref_max_abs == 0.0) {
    for (const auto& d : todo) rows.push_back(non_result(s, d, "error", "the golden output is all zeros: refusing to compare"));
    store.add(scenario_row(s), rows, {}, std::nullopt);
    return rows;
  }

  for (const auto& name : todo) {
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
    const auto t0 = std::chrono::steady_clock::now();
    dut::Status status;
    try {
      status = dut::run_schedule(*dut, p);
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
    rows.push_back(judge(s, pr, name, out, g, base));
    rows.back().run_ms = ms;
    if (dump_policy == DumpPolicy::all || rows.back().status != "pass") dump_add(name, std::move(out));
    if (perf) try {
        perf_rows.push_back(time_dut(s, pr, *dut, *perf, options.ceiling_gflops));
      } catch (const std::exception& e) {
        rows.back().reason += (rows.back().reason.empty() ? "" : "; ") + std::string("perf run failed: ") + e.what();
      }
  }
  store.add(scenario_row(s), rows, perf_rows, dump);
  return rows;
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
        failed += r.status == "fail" || r.status == "error";
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
