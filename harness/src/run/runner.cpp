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

namespace {

// The progress lines of the scenarios whose rows were added, each printed once the store has
// committed them (results_store.hpp), so every scenario the console calls finished is in the file,
// whenever the run is killed. A commit on the store's own thread (commit_in_background) prints what it
// committed at once. When the file cannot be written, it stops the run and keeps what it lost.
class CommittedProgress {
 public:
  CommittedProgress(ResultsStore& store, ProgressLine& line) : store_(store), line_(line) {
    store_.on_commit([this] {
      std::lock_guard lock(mutex_);
      print_committed();
    });
  }
  ~CommittedProgress() { store_.on_commit(nullptr); }
  CommittedProgress(const CommittedProgress&) = delete;
  CommittedProgress& operator=(const CommittedProgress&) = delete;

  void added(const Scenario& s, ResultsStore::Added added) {
    std::lock_guard lock(mutex_);
    // A failed commit may have taken this scenario's rows with it after add returned.
    if (std::find(outcome_.not_stored.begin(), outcome_.not_stored.end(), s.id()) != outcome_.not_stored.end()) return;
    const auto at = std::find_if(waiting_.begin(), waiting_.end(), [&](const Line& l) { return l.ticket > added.ticket; });
    waiting_.insert(at, Line{added.ticket, &s, std::move(added.rows)});
    print_committed();
  }
  // Nothing more can be kept: no new scenario starts; the file holds what was committed before.
  void not_stored(const ResultsNotWritten& e) {
    std::lock_guard lock(mutex_);
    if (!stop_.exchange(true)) outcome_.storage_error = e.what();
    outcome_.not_stored.insert(outcome_.not_stored.end(), e.scenario_ids.begin(), e.scenario_ids.end());
    std::erase_if(waiting_, [&](const Line& l) { return l.ticket > store_.committed_ticket(); });
  }
  bool stopped() const { return stop_; }
  // The last commit, its lines, and the run's outcome.
  RunOutcome finish() {
    try {
      store_.flush();
    } catch (const ResultsNotWritten& e) {
      not_stored(e);
    }
    std::lock_guard lock(mutex_);
    print_committed();
    line_.finish();
    return outcome_;
  }

 private:
  struct Line {
    std::uint64_t ticket;
    const Scenario* scenario;
    std::vector<ResultRow> rows;
  };
  void print_committed() {  // mutex_ held
    const std::uint64_t committed = store_.committed_ticket();
    auto it = waiting_.begin();
    for (; it != waiting_.end() && it->ticket <= committed; ++it) line_.scenario_done(it->scenario->id(), it->rows);
    waiting_.erase(waiting_.begin(), it);
  }

  ResultsStore& store_;
  ProgressLine& line_;
  std::mutex mutex_;
  std::vector<Line> waiting_;  // in ticket order
  RunOutcome outcome_;
  std::atomic<bool> stop_{false};
};

using PreparedReference = std::future<std::unique_ptr<Reference>>;

// The jobs of one run: each takes the next scenario and builds the one after's Reference (inputs,
// golden: read or computed) on a thread of its own while the current scenario's DUTs run, except
// around a timed (perf) scenario, so that the harness's own work overlaps the DUT's.
class Jobs {
 public:
  Jobs(const std::vector<Scenario>& scenarios, ResultsStore& store, const RunOptions& options, CommittedProgress& progress)
      : scenarios_(scenarios), store_(store), options_(options), progress_(progress),
        threads_each_(std::max(1, omp_get_num_procs() / std::max(1, options.jobs))) {}

  void run() {
    std::vector<std::thread> pool;
    for (int j = 1; j < std::max(1, options_.jobs); ++j) pool.emplace_back([this] { job(); });
    job();
    for (auto& t : pool) t.join();
  }

 private:
  void job() {
    omp_set_num_threads(threads_each_);
    PreparedReference prepared;  // scenario i's Reference, when it was built ahead
    for (std::size_t i = next_++; !progress_.stopped() && i < scenarios_.size();) {
      const std::size_t following = next_++;
      PreparedReference ahead;
      if (following < scenarios_.size() && !timed(scenarios_[i]) && !stored(scenarios_[following]))
        ahead = prepare(scenarios_[following]);
      run_one(scenarios_[i], prepared.valid() ? prepared.get() : nullptr);
      i = following;
      prepared = std::move(ahead);
    }
  }

  void run_one(const Scenario& s, std::unique_ptr<Reference> prepared) {
    const auto& duts = duts_of(s);
    store_.begin(s.id());
    ResultsStore::Added added;
    try {
      added = run_scenario(s, duts, store_, options_, std::move(prepared));
    } catch (const ResultsNotWritten& e) {
      store_.end(s.id());
      progress_.not_stored(e);
      return;
    } catch (const std::exception& e) {
      // Never let one scenario take the sweep down: its DUTs get error rows, the rest runs on.
      std::vector<ResultRow> rows;
      for (const auto& d : duts) rows.push_back(unjudged_row(s, d, Verdict::error, std::string("harness: ") + e.what()));
      try {
        added = store_.add(scenario_row(s), rows, {}, std::nullopt);
      } catch (const ResultsNotWritten& w) {
        store_.end(s.id());
        progress_.not_stored(w);
        return;
      }
    }
    store_.end(s.id());
    progress_.added(s, std::move(added));
  }

  PreparedReference prepare(const Scenario& s) const {
    return std::async(std::launch::async, [&s, this] {
      omp_set_num_threads(threads_each_);
      return std::make_unique<Reference>(s, options_.golden_cache);
    });
  }
  bool timed(const Scenario& s) const { return options_.perf || s.perf; }
  const std::vector<std::string>& duts_of(const Scenario& s) const { return options_.duts.empty() ? s.duts : options_.duts; }
  bool stored(const Scenario& s) const {  // every DUT's row is in the file already (--resume)
    const auto& duts = duts_of(s);
    return std::all_of(duts.begin(), duts.end(), [&](const std::string& d) { return store_.done(s.id(), d); });
  }

  const std::vector<Scenario>& scenarios_;
  ResultsStore& store_;
  const RunOptions& options_;
  CommittedProgress& progress_;
  const int threads_each_;
  std::atomic<std::size_t> next_{0};
};

}  // namespace

RunOutcome run_scenarios(const std::vector<Scenario>& scenarios, ResultsStore& store, const RunOptions& options,
                         std::ostream& progress) {
  ProgressLine line(scenarios.size(), options.progress_on_terminal, progress, {}, options.progress_columns);
  CommittedProgress committed(store, line);
  Jobs(scenarios, store, options, committed).run();
  return committed.finish();
}

}  // namespace swa::harness
