#include "swa/harness/store/results_store.hpp"

#include <algorithm>
#include <iostream>
#include <limits>
#include <system_error>

#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/base/h5.hpp"
#include "swa/harness/base/interrupt.hpp"
#include "swa/platform/lock_file.hpp"

namespace fs = std::filesystem;

namespace swa::harness {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kCommitCostShare = 0.1;                  // rewriting stays under about this share of the run
constexpr std::chrono::duration<double> kMaxDelay{1.0};  // and nothing finished waits longer than this

// PATH.lock, or why another run holds it.
platform::LockFile lock_results_file(const fs::path& path, const std::string& command) {
  const fs::path lock_path = path.string() + ".lock";
  std::string held_by;
  std::optional<platform::LockFile> lock;
  try {
    lock = platform::LockFile::try_lock(lock_path, command, held_by);
  } catch (const std::system_error& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
  if (!lock)
    throw std::runtime_error(path.string() + " is being written by another run: " + held_by +
                             "; wait for it or give another --out");
  return std::move(*lock);
}

}  // namespace

// The lock file, and its removal by an interrupt (which exits without running destructors: the
// handler removes the file while this process still holds the lock).
struct ResultsStore::Lock {
  platform::LockFile file;
  TrackedPath tracked;
  Lock(const fs::path& results, const std::string& command)
      : file(lock_results_file(results, command)), tracked(file.path()) {}
};

struct ResultsFileLock::Held {
  platform::LockFile file;
  TrackedPath tracked;
  Held(const fs::path& results, const std::string& command)
      : file(lock_results_file(results, command)), tracked(file.path()) {}
};

ResultsFileLock::ResultsFileLock(const fs::path& results, const std::string& command)
    : held_(std::make_unique<Held>(results, command)) {}
ResultsFileLock::~ResultsFileLock() = default;

ResultsStore::ResultsStore(fs::path path, Meta meta, bool resume, bool other_sweep_text_ok)
    : path_(std::move(path)),
      lock_(std::make_unique<Lock>(path_, meta.command)),
      in_flight_marker_(path_.string() + ".inflight") {
  // Temporaries of earlier runs killed while writing (kill -9, power loss) go now.
  remove_orphaned_temporaries(path_);
  if (resume && fs::exists(path_)) {
    contents_ = read_results(path_);
    // /meta describes the sweep the rows came from; rows of another sweep under it would lie.
    if (contents_.meta.sweep_text != meta.sweep_text && !other_sweep_text_ok)
      throw h5::Error("--resume: " + path_.string() + " was written from another sweep file text (" +
                      contents_.meta.sweep_file + ", not " + meta.sweep_file +
                      " as it is now); resume with the same sweep file, write to a new --out, or pass --force to "
                      "add these rows under its old /meta");
    contents_.meta.command += " ; resumed: " + meta.command;
  } else {
    contents_.meta = std::move(meta);
  }
  const auto t0 = Clock::now();
  write_results(path_, contents_);  // an empty but valid file from the start
  last_commit_end_ = Clock::now();
  last_commit_cost_ = last_commit_end_ - t0;
  committed_ = {contents_.scenarios.size(), contents_.results.size(), contents_.perf.size()};
}

ResultsStore::~ResultsStore() {
  stop_committer();
  try {
    flush();
  } catch (const ResultsNotWritten& e) {
    std::cerr << "swa-harness: " << e.scenario_ids.size() << " finished scenarios could not be stored in "
              << path_.string() << ": " << e.what() << "\n";
  } catch (...) {
  }
}

bool ResultsStore::done(const std::string& scenario_id, const std::string& dut) const {
  std::lock_guard lock(mutex_);
  return std::any_of(contents_.results.begin(), contents_.results.end(),
                     [&](const ResultRow& r) { return r.scenario_id == scenario_id && r.dut == dut; });
}

ResultsStore::Added ResultsStore::add(const ScenarioRow& scenario, std::vector<ResultRow> rows,
                                      const std::vector<PerfRow>& perf, const std::optional<ProblemFile>& dump) {
  std::unique_lock lock(mutex_);
  if (closed_) return {std::move(rows), std::numeric_limits<std::uint64_t>::max()};  // never committed
  rethrow_background_failure(scenario.id);  // its rows join nothing either: the run stops (runner.cpp)
  if (dump) try {
      const fs::path dir = dumps_dir(path_);
      fs::create_directories(dir);
      const fs::path file = fs::absolute(dir / dump_file_name(dump->scenario_id));
      write_problem_file(file, *dump);
      contents_.dump_files[dump->scenario_id] = file;
      pending_dumps_.push_back(file);
    } catch (const std::exception& e) {
      for (auto& r : rows)
        if (std::any_of(dump->duts.begin(), dump->duts.end(), [&](const ProblemFile::DutOutput& o) { return o.dut == r.dut; }))
          r.reason += (r.reason.empty() ? "" : "; ") + std::string("tensor dump not written: ") + e.what();
    }
  const bool known = std::any_of(contents_.scenarios.begin(), contents_.scenarios.end(),
                                 [&](const ScenarioRow& s) { return s.id == scenario.id; });
  if (!known) contents_.scenarios.push_back(scenario);
  contents_.results.insert(contents_.results.end(), rows.begin(), rows.end());
  contents_.perf.insert(contents_.perf.end(), perf.begin(), perf.end());
  pending_ids_.push_back(scenario.id);
  const std::uint64_t ticket = ++added_ticket_;
  if (!commit_due_locked()) return {std::move(rows), ticket};
  if (!committer_.joinable()) {
    commit(lock, every_scenario_ ? Wait::for_running_commit : Wait::no);
  } else if (!committing_ && !commit_asked_) {
    commit_asked_ = true;
    commit_wanted_.notify_all();
  }
  return {std::move(rows), ticket};
}

bool ResultsStore::commit_due_locked() const {
  if (every_scenario_) return true;
  const auto waited = std::chrono::duration<double>(Clock::now() - last_commit_end_);
  return waited >= std::min(kMaxDelay, last_commit_cost_ / kCommitCostShare);
}

// All or nothing: pending rows join the file only once the file holding them is in place, so a
// failed rewrite (a full disk) leaves store and file as they were at the last commit.
//
// The file is built and written from a copy of the rows with the lock released: another job goes
// on adding rows, and marking scenarios begun and ended, while a commit writes and syncs (a few
// milliseconds; the other job stood still for all of them before). One commit runs at a time, and
// it records only the rows of its copy as committed.
void ResultsStore::commit(std::unique_lock<std::mutex>& lock, Wait wait) {
  if (committing_) {
    if (wait == Wait::no) return;  // the running commit or a later one takes these rows
    commit_done_.wait(lock, [&] { return !committing_; });
  }
  if (pending_ids_.empty()) return;
  const auto t0 = Clock::now();
  const ResultsContents copy = contents_;
  committing_ = true;
  const std::uint64_t ticket = added_ticket_;
  const std::size_t ids = pending_ids_.size(), dumps = pending_dumps_.size();
  lock.unlock();
  std::optional<std::string> failure;
  try {
    write_results(path_, copy);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  lock.lock();
  committing_ = false;
  commit_done_.notify_all();
  if (failure) {
    // Every pending row goes, those added during the write too: the file holds none of them.
    std::error_code ignored;
    for (const auto& file : pending_dumps_) fs::remove(file, ignored);
    for (auto it = contents_.dump_files.begin(); it != contents_.dump_files.end();)
      it = std::find(pending_dumps_.begin(), pending_dumps_.end(), it->second) != pending_dumps_.end()
               ? contents_.dump_files.erase(it)
               : std::next(it);
    contents_.scenarios.resize(committed_.scenarios);
    contents_.results.resize(committed_.results);
    contents_.perf.resize(committed_.perf);
    std::vector<std::string> lost = std::move(pending_ids_);
    pending_ids_.clear();
    pending_dumps_.clear();
    write_in_flight();
    throw ResultsNotWritten(*failure, std::move(lost));
  }
  last_commit_end_ = Clock::now();
  last_commit_cost_ = last_commit_end_ - t0;
  committed_ = {copy.scenarios.size(), copy.results.size(), copy.perf.size()};
  committed_ticket_ = ticket;
  pending_ids_.erase(pending_ids_.begin(), pending_ids_.begin() + static_cast<std::ptrdiff_t>(ids));
  pending_dumps_.erase(pending_dumps_.begin(), pending_dumps_.begin() + static_cast<std::ptrdiff_t>(dumps));
  write_in_flight();
}

// Once, not until nothing is pending: on SIGINT the jobs are still adding rows (the in-flight list
// names those the process then leaves behind).
void ResultsStore::flush() {
  std::unique_lock lock(mutex_);
  wait_for_background(lock);
  if (!closed_) commit(lock, Wait::for_running_commit);
}

void ResultsStore::flush_and_close() {
  std::unique_lock lock(mutex_);
  if (closed_) return;
  closed_ = true;  // before the commit, which releases the lock while it writes
  wait_for_background(lock);
  commit(lock, Wait::for_running_commit);
}

void ResultsStore::commit_in_background() {
  std::lock_guard lock(mutex_);
  if (!committer_.joinable() && !stopping_) committer_ = std::thread([this] { commit_loop(); });
}

void ResultsStore::on_commit(std::function<void()> told) {
  std::lock_guard lock(told_mutex_);
  told_ = std::move(told);
}

void ResultsStore::commit_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    commit_wanted_.wait(lock, [&] { return commit_asked_ || stopping_; });
    if (stopping_) break;
    try {
      if (!background_failure_) commit(lock, Wait::for_running_commit);
    } catch (ResultsNotWritten& e) {
      background_failure_ = std::move(e);
    }
    commit_asked_ = false;
    commit_done_.notify_all();
    lock.unlock();
    {
      std::lock_guard told(told_mutex_);
      if (told_) told_();
    }
    lock.lock();
  }
  commit_asked_ = false;
  commit_done_.notify_all();
}

void ResultsStore::wait_for_background(std::unique_lock<std::mutex>& lock) {
  commit_done_.wait(lock, [&] { return !commit_asked_ && !committing_; });
  rethrow_background_failure();
}

void ResultsStore::rethrow_background_failure(const std::string& also_lost) {
  if (!background_failure_) return;
  ResultsNotWritten failure = std::move(*background_failure_);
  background_failure_.reset();
  if (!also_lost.empty()) failure.scenario_ids.push_back(also_lost);
  throw failure;
}

void ResultsStore::stop_committer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  commit_wanted_.notify_all();
  if (committer_.joinable()) committer_.join();
}

std::uint64_t ResultsStore::committed_ticket() const {
  std::lock_guard lock(mutex_);
  return committed_ticket_;
}

std::size_t ResultsStore::scenarios_stored() const {
  std::lock_guard lock(mutex_);
  return committed_.scenarios;
}

std::vector<ResultRow> ResultsStore::results() const {
  std::lock_guard lock(mutex_);
  return contents_.results;
}

void ResultsStore::begin(const std::string& scenario_id) {
  std::lock_guard lock(mutex_);
  in_flight_.push_back(scenario_id);
  write_in_flight();
}

void ResultsStore::end(const std::string& scenario_id) {
  std::lock_guard lock(mutex_);
  if (closed_) return;  // its rows stay out of the file: the in-flight list keeps naming it
  std::erase(in_flight_, scenario_id);
  write_in_flight();
}

void ResultsStore::write_in_flight() {
  std::string text;
  for (const auto& id : in_flight_) text += id + "\n";
  for (const auto& id : pending_ids_)
    if (std::find(in_flight_.begin(), in_flight_.end(), id) == in_flight_.end()) text += id + "\n";
  in_flight_marker_.write(text);
}

}  // namespace swa::harness
