#include "swa/harness/run/runner.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <ostream>
#include <thread>

#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/judge/evaluate.hpp"
#include "swa/harness/run/perf.hpp"
#include "swa/harness/run/progress.hpp"
#include "swa/harness/judge/verdict.hpp"

namespace swa::harness {

ResultsStore::Added run_scenario(const Scenario& s, const std::vector<std::string>& duts, ResultsStore& store,
                                 const RunOptions& options, std::unique_ptr<Reference> prepared) {
  const DumpPolicy dump_policy = options.dump;
  const std::optional<PerfSettings> perf = options.perf ? options.perf : s.perf;
  std::vector<std::string> todo;
  for (const auto& d : duts)
    if (!store.done(s.id(), d)) todo.push_back(d);
  if (todo.empty()) return {};  // ticket 0: nothing to commit

  const std::unique_ptr<Reference> built =
      prepared ? std::move(prepared) : std::make_unique<Reference>(s, options.golden_cache);
  const Reference& ref = *built;
  const Problem& pr = ref.problem;
  const Tolerance tolerance = options.profile ? tolerance_for(*options.profile, s.dtype) : s.tolerance;
  std::vector<ResultRow> rows;
  std::vector<PerfRow> perf_rows;
  std::optional<ProblemFile> dump;  // the tensors of a failing (or --dump all) scenario
  auto dump_add = [&](int index, const std::string& name, std::vector<float> out, const ResultRow& row) {
    if (!dump) {
      dump = problem_file(s, ref, ProblemFileKind::dump);
    }
    dump->duts.push_back({index, name, std::move(out),
                          {{"verdict", std::string(verdict_name(row.status))}, {"reason", row.reason}}});
  };

  // Never compare on zeros: the reference and the inputs must carry signal.
  if (std::all_of(ref.golden.out.begin(), ref.golden.out.end(), [](double x) { return x == 0.0; })) {
    for (const auto& d : todo)
      rows.push_back(unjudged_row(s, d, Verdict::error, "the golden output is all zeros: refusing to compare"));
    return store.add(scenario_row(s, &pr.params), rows, {}, std::nullopt);
  }

  for (const auto& name : todo) {
    const int index = static_cast<int>(std::find(duts.begin(), duts.end(), name) - duts.begin());
    std::unique_ptr<dut::Dut> dut;
    try {
      dut = make_dut(name, options.dut_options);
    } catch (const std::exception& e) {
      rows.push_back(unjudged_row(s, name, Verdict::error, e.what()));
      continue;
    }
    Evaluation e = evaluate(s, ref, *dut, name, tolerance, options.cache_check && s.cache_check);
    rows.push_back(std::move(e.row));
    if (e.out.empty()) continue;  // skipped or failed to run: nothing to dump or time
    if (dump_policy == DumpPolicy::all || rows.back().status != Verdict::pass) dump_add(index, name, std::move(e.out), rows.back());
    if (perf) try {
        perf_rows.push_back(time_dut(s, pr, *dut, *perf, options.ceiling_gflops));
        perf_rows.back().triad_gbs = options.triad_gbs;
      } catch (const std::exception& e) {
        rows.back().reason += (rows.back().reason.empty() ? "" : "; ") + std::string("perf run failed: ") + e.what();
      }
  }
  return store.add(scenario_row(s, &pr.params), rows, perf_rows, dump);
}

RunOutcome run_scenarios(const std::vector<Scenario>& scenarios, ResultsStore& store, const RunOptions& options,
                         std::ostream& progress) {
  RunOutcome outcome;
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> next{0};
  std::mutex log_mutex;
  ProgressLine line_out(scenarios.size(), options.progress_on_terminal, progress, {}, options.progress_columns);
  const int jobs = std::max(1, options.jobs);
  const int threads_each = std::max(1, omp_get_num_procs() / jobs);
  // A scenario's progress line is printed once its rows are committed to the file (results_store.hpp),
  // so every scenario the console calls finished is in the file, whenever the run is killed.
  struct Line {
    std::uint64_t ticket;
    const Scenario* scenario;
    std::vector<ResultRow> rows;
  };
  std::vector<Line> waiting;  // in ticket order
  auto print = [&](const Line& line) { line_out.scenario_done(line.scenario->id(), line.rows); };
  auto print_committed = [&] {  // log_mutex held
    const std::uint64_t committed = store.committed_ticket();
    auto it = waiting.begin();
    for (; it != waiting.end() && it->ticket <= committed; ++it) print(*it);
    waiting.erase(waiting.begin(), it);
  };
  // A commit on the store's own thread (commit_in_background) prints what it committed at once.
  store.on_commit([&] {
    std::lock_guard lock(log_mutex);
    print_committed();
  });
  struct StopTelling {
    ResultsStore& store;
    ~StopTelling() { store.on_commit(nullptr); }
  } stop_telling{store};
  // Nothing more can be kept: no new scenario starts; the file holds what was committed before.
  auto not_stored = [&](const ResultsNotWritten& e) {
    std::lock_guard lock(log_mutex);
    if (!stop.exchange(true)) outcome.storage_error = e.what();
    outcome.not_stored.insert(outcome.not_stored.end(), e.scenario_ids.begin(), e.scenario_ids.end());
    std::erase_if(waiting, [&](const Line& l) { return l.ticket > store.committed_ticket(); });
  };
  // A Reference built on a thread of its own, for the scenario a job runs next.
  auto prepare = [&](const Scenario& s) {
    return std::async(std::launch::async, [&s, &options, threads_each] {
      omp_set_num_threads(threads_each);
      return std::make_unique<Reference>(s, options.golden_cache);
    });
  };
  auto timed = [&](const Scenario& s) { return options.perf || s.perf; };
  auto duts_of = [&](const Scenario& s) -> const std::vector<std::string>& {
    return options.duts.empty() ? s.duts : options.duts;
  };
  auto stored = [&](const Scenario& s) {  // every DUT's row is in the file already (--resume)
    const auto& duts = duts_of(s);
    return std::all_of(duts.begin(), duts.end(), [&](const std::string& d) { return store.done(s.id(), d); });
  };
  auto run_one = [&](const Scenario& s, std::future<std::unique_ptr<Reference>>& prepared) {
    const auto& duts = duts_of(s);
    store.begin(s.id());
    ResultsStore::Added added;
    try {
      added = run_scenario(s, duts, store, options, prepared.valid() ? prepared.get() : nullptr);
    } catch (const ResultsNotWritten& e) {
      store.end(s.id());
      not_stored(e);
      return;
    } catch (const std::exception& e) {
      // Never let one scenario take the sweep down: its DUTs get error rows, the rest runs on.
      std::vector<ResultRow> rows;
      for (const auto& d : duts) rows.push_back(unjudged_row(s, d, Verdict::error, std::string("harness: ") + e.what()));
      try {
        added = store.add(scenario_row(s), rows, {}, std::nullopt);
      } catch (const ResultsNotWritten& w) {
        store.end(s.id());
        not_stored(w);
        return;
      }
    }
    store.end(s.id());
    std::lock_guard lock(log_mutex);
    // A failed commit may have taken this scenario's rows with it after add returned.
    if (std::find(outcome.not_stored.begin(), outcome.not_stored.end(), s.id()) != outcome.not_stored.end()) return;
    const auto at = std::find_if(waiting.begin(), waiting.end(), [&](const Line& l) { return l.ticket > added.ticket; });
    waiting.insert(at, Line{added.ticket, &s, std::move(added.rows)});
    print_committed();
  };
  auto worker = [&] {
    omp_set_num_threads(threads_each);
    std::future<std::unique_ptr<Reference>> prepared;  // scenario i's Reference, when it was built ahead
    for (std::size_t i = next++; !stop && i < scenarios.size();) {
      // The next scenario's Reference is built while this one's DUTs run; not while one is timed.
      const std::size_t following = next++;
      std::future<std::unique_ptr<Reference>> ahead;
      if (following < scenarios.size() && !timed(scenarios[i]) && !stored(scenarios[following]))
        ahead = prepare(scenarios[following]);
      run_one(scenarios[i], prepared);
      i = following;
      prepared = std::move(ahead);
    }
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < jobs; ++j) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  try {
    store.flush();
  } catch (const ResultsNotWritten& e) {
    not_stored(e);
  }
  {
    std::lock_guard lock(log_mutex);
    print_committed();
  }
  line_out.finish();
  return outcome;
}

}  // namespace swa::harness
