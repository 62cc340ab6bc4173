#pragma once
// Collects rows as scenarios finish and commits them to the results file. Thread-safe.
//
// A commit rewrites the whole file (results_file.hpp), so committing after every scenario costs
// O(scenarios²) over a sweep: on ci.yaml about 3 ms a rewrite, 2.3 s of a 7.6 s warm run. Rows
// are therefore committed once at least ten times a commit's own cost has passed since the last
// one (at most a second), which keeps rewriting under about a tenth of the run. A commit writes a
// copy of the rows with the lock released, so other jobs go on adding rows meanwhile; one commit
// runs at a time, and rows added during it wait for the next. What has not been
// committed yet is named in RESULTS.h5.inflight, with the scenarios still running, so a process
// killed outright (kill -9, the OOM killer) loses at most that fraction of a second of finished
// work, and --resume reruns exactly it. flush() commits the rest: at the end of a run, on SIGINT
// or SIGTERM (interrupt.hpp), and in the destructor. Where a DUT can kill the process itself
// (a plugin loaded --in-process), commit_every_scenario() commits after each.
//
// commit_in_background() moves the commits onto a thread of the store's own, so that a job never
// waits for a rewrite (at run --jobs 1 the rewrite then overlaps the DUT's work instead of adding to
// it: on ci.yaml through python: about 1.2 s of a 19 s run). The rows, tickets, in-flight list and
// failures are the same; a failed background commit is thrown by the next add() (which then names
// its own scenario too: its rows join nothing) or by flush(). on_commit() is told after each
// background commit, so the console follows the file without waiting for the next scenario.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "swa/harness/base/in_flight_marker.hpp"
#include "swa/harness/store/results_file.hpp"

namespace swa::harness {

// The results file could not be rewritten (a full disk, a folder gone): the store and the file are
// as they were at the last commit; `scenario_ids` ran since and are in neither.
struct ResultsNotWritten : std::runtime_error {
  ResultsNotWritten(const std::string& what, std::vector<std::string> ids)
      : std::runtime_error(what), scenario_ids(std::move(ids)) {}
  std::vector<std::string> scenario_ids;
};

// RESULTS.h5.lock held for a writer that is not a ResultsStore (merge --out, a pytest session's
// --swa-out): two writers of one results file exclude each other as two runs do. Throws
// std::runtime_error naming the file and who holds it.
class ResultsFileLock {
 public:
  ResultsFileLock(const std::filesystem::path& results, const std::string& command);
  ~ResultsFileLock();
  ResultsFileLock(const ResultsFileLock&) = delete;
  ResultsFileLock& operator=(const ResultsFileLock&) = delete;

 private:
  struct Held;
  std::unique_ptr<Held> held_;
};

class ResultsStore {
 public:
  // With resume, the rows already in `path` are kept and reported as done.
  // With resume, a file written from another sweep text is refused unless other_sweep_text_ok.
  // The file is locked for the life of the store (PATH.lock beside it, platform/lock_file.hpp),
  // before anything is read or written: a second store on it, in this process or another, throws
  // std::runtime_error naming the file and who writes it (the holder's pid, host, start time and
  // meta.command), and never writes. Two runs on one --out would otherwise each rewrite the file
  // from their own rows, and one run's rows would be lost.
  ResultsStore(std::filesystem::path path, Meta meta, bool resume, bool other_sweep_text_ok = false);
  ~ResultsStore();  // commits what is pending; a failure there is only reported on stderr
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;

  void commit_every_scenario() {
    std::lock_guard lock(mutex_);
    every_scenario_ = true;
  }
  void commit_in_background();  // not with commit_every_scenario()
  // Called on the committing thread after each background commit, without the store's lock (it may
  // call committed_ticket()); nullptr stops the calls, and returns once a running call has ended.
  void on_commit(std::function<void()> told);

  bool done(const std::string& scenario_id, const std::string& dut) const;
  // RESULTS.h5.inflight lists the scenarios running now and those finished but not yet committed,
  // so a DUT that kills the process leaves their IDs beside the results of everything committed.
  void begin(const std::string& scenario_id);
  void end(const std::string& scenario_id);

  struct Added {
    std::vector<ResultRow> rows;  // as stored
    std::uint64_t ticket = 0;     // in the file once committed_ticket() reaches it, unless a
                                  // failed commit named its scenario (tickets are never reused)
  };
  // Adds the rows, committing them now or later (see above). A dump that cannot be written never
  // changes a verdict or a metric: the rows of the dumped DUTs say so in their reason. Throws
  // ResultsNotWritten when a commit it makes fails.
  Added add(const ScenarioRow& scenario, std::vector<ResultRow> rows, const std::vector<PerfRow>& perf,
            const std::optional<ProblemFile>& dump);
  void flush();  // commits what is pending now (after a running commit ends); throws ResultsNotWritten
  // An interrupt's last commit: flush(), and nothing after it. Rows added later come from scenarios
  // the interrupt cut short (their DUT may have died of the same signal) and never reach the file;
  // --resume runs them again.
  void flush_and_close();
  std::uint64_t committed_ticket() const;

  std::vector<ResultRow> results() const;  // committed or not
  std::size_t scenarios_stored() const;    // committed
  const std::filesystem::path& path() const { return path_; }

 private:
  struct Sizes {
    std::size_t scenarios = 0, results = 0, perf = 0;
  };
  std::filesystem::path path_;
  struct Lock;                  // PATH.lock, held from before the first read to after the last write
  std::unique_ptr<Lock> lock_;  // after path_, before in_flight_marker_: built first, released last
  mutable std::mutex mutex_;
  ResultsContents contents_;  // committed, then pending
  Sizes committed_;
  std::vector<std::string> pending_ids_;
  std::vector<std::filesystem::path> pending_dumps_;
  std::vector<std::string> in_flight_;
  std::uint64_t added_ticket_ = 0, committed_ticket_ = 0;
  std::chrono::steady_clock::time_point last_commit_end_{};
  std::chrono::duration<double> last_commit_cost_{0};
  bool every_scenario_ = false;
  bool closed_ = false;  // flush_and_close() ran

  std::condition_variable commit_done_;
  bool committing_ = false;  // a commit is writing the file, the lock released

  // The background committer (commit_in_background): asked by add() when a commit is due.
  std::thread committer_;
  std::condition_variable commit_wanted_;
  bool commit_asked_ = false, stopping_ = false;
  std::optional<ResultsNotWritten> background_failure_;  // thrown by the next add() or flush()
  std::mutex told_mutex_;  // held while on_commit's function runs
  std::function<void()> told_;
  void commit_loop();
  void wait_for_background(std::unique_lock<std::mutex>& lock);  // no commit asked or running; rethrows its failure
  void rethrow_background_failure(const std::string& also_lost = {});  // once, naming also_lost too; mutex_ held
  void stop_committer();

  enum class Wait { no, for_running_commit };
  // Commits the pending rows; `lock` holds mutex_ on entry and on return. With a commit already
  // running, returns at once (Wait::no) or waits for it, then commits what is still pending.
  void commit(std::unique_lock<std::mutex>& lock, Wait wait);
  bool commit_due_locked() const;
  InFlightMarker in_flight_marker_;  // after path_: built from it
  void write_in_flight();
};

}  // namespace swa::harness
