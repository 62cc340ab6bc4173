#pragma once
// A sweep across a Slurm cluster: the folder `swa-harness submit` fills, the job-array and merge
// scripts it writes, and the collection of the shards once the array has ended.
//
// Slurm schedules, retries and accounts; this code only writes its scripts and reads back what the
// tasks left in the folder. Every file of a submission lives in one folder on a file system the
// nodes share (the layout is in harness/README.md, "Sweeps across machines").
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "swa/harness/store/results_file.hpp"

namespace swa::harness::slurm {

// What `submit` was asked for; stored as DIR/submission.json so that `collect` can judge the shards.
struct Submission {
  std::filesystem::path dir;      // absolute; the submission's folder
  std::filesystem::path harness;  // absolute path of the swa-harness binary the tasks run
  std::filesystem::path workdir;  // the tasks' working folder (relative DUT paths resolve here)
  std::string sweep_source;       // the sweep file named on the command line (snapshotted as DIR/sweep.yaml)
  std::optional<std::string> sweep_name, filter;
  std::string job_name;
  int shards = 1;
  int max_parallel = 0;  // 0: as many tasks at once as Slurm allows
  int cpus_per_task = 1;
  int gpus_per_task = 0;  // 0: no --gpus-per-task line
  std::string partition, time_limit;
  std::vector<std::string> sbatch_args;  // extra "--name[=value]" lines, validated by the caller
  std::vector<std::string> run_args;     // forwarded to every task's `swa-harness run` (--dut ...)
  std::string array_job_id, merge_job_id;  // filled once submitted
  std::string sweep_digest;  // SHA-256 of DIR/sweep.yaml when submitted; empty in records older than it
};

// The files of a submission's folder.
std::filesystem::path sweep_snapshot(const Submission& s);  // DIR/sweep.yaml
std::filesystem::path array_script_path(const Submission& s);
std::filesystem::path merge_script_path(const Submission& s);
std::filesystem::path record_path(const Submission& s);  // DIR/submission.json
std::filesystem::path shard_results(const Submission& s, int shard);
std::filesystem::path shard_end_record(const Submission& s, int shard);  // exit code of the task's run
std::filesystem::path shard_log(const Submission& s, int shard);
std::filesystem::path merged_results(const Submission& s);
std::filesystem::path merged_junit(const Submission& s);
std::filesystem::path summary_path(const Submission& s);
std::filesystem::path report_dir(const Submission& s);

std::string array_script(const Submission& s);
std::string merge_script(const Submission& s);

// SHA-256 (hex) of DIR/sweep.yaml as it is now; throws std::runtime_error naming it when unreadable.
std::string snapshot_digest(const Submission& s);

void write_record(const Submission& s);
// Throws std::runtime_error naming the file and the field that is missing or wrong.
Submission read_record(const std::filesystem::path& dir);

// The job id in `sbatch --parsable` output ("123" or "123;cluster"); nullopt if there is none.
std::optional<std::string> parsable_job_id(const std::string& sbatch_output);

// The command that resubmits only `shards` of the array and a merge after them; each task resumes
// from the rows its shard file already holds.
std::string rerun_command(const Submission& s, const std::vector<int>& shards);

// How a shard's array task ended, from the end record the task's script writes and its results file.
enum class ShardOutcome {
  finished_passing,   // run exited 0
  finished_failing,   // run exited 1: the shard ran whole, some rows fail
  bad_input,          // run exited 2: invalid input or an internal error (the log says which)
  not_stored,         // run exited 3: its results could not be written (a full disk)
  interrupted,        // SIGTERM/SIGINT: time limit, scancel, requeue or preemption
  failed,             // any other exit code
  no_end_record,      // killed outright (SIGKILL, node failure), still running, or never started
};
const char* outcome_text(ShardOutcome o);
bool finished(ShardOutcome o);

struct ShardState {
  int shard = 0;
  ShardOutcome outcome = ShardOutcome::no_end_record;
  int exit_code = -1;  // -1: no end record
  int restarts = 0;    // Slurm requeues of the task's last attempt
  std::size_t expected = 0;               // scenarios of this shard in the sweep snapshot
  std::optional<std::size_t> stored;      // scenarios in its results file; nullopt: no readable file
  std::string unreadable;                 // why the results file could not be read, if it exists
};

struct Collection {
  std::vector<ShardState> shards;
  ResultsContents merged;  // every readable shard file, finished or not
  std::vector<std::string> warnings;
  std::vector<int> unfinished() const;
  bool any_results() const;
};

// Reads every shard's end record and results file and merges what is readable. Throws
// std::runtime_error when DIR/sweep.yaml is not the sweep submitted (its digest differs).
Collection collect(const Submission& s);
std::string summary_text(const Submission& s, const Collection& c);

}  // namespace swa::harness::slurm
