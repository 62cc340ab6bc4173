#pragma once
// The results HDF5 file: /meta, /scenarios, /results and /dumps (layout in harness/README.md).
//
// Crash safety: after every scenario the whole file is written to a temporary and renamed into
// place, so at any instant, kill -9 included, the path holds a complete, readable file with every
// finished scenario. Dumps are problem files (problem_file.hpp), written once each to
// RESULTS.h5.dumps/ and linked from /dumps/<ID> by HDF5 external links (h5py follows them).
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "swa/harness/perf.hpp"
#include "swa/harness/problem_file.hpp"
#include "swa/harness/results.hpp"

namespace swa::harness {

struct Meta {
  std::string tool_version, git_commit, compiler, host, cpu, gpu, start_time, sweep_file, sweep_text, command;
  // The CPU DUT's instruction paths in this process (Eigen's SIMD sets, the fp16/bf16 conversion
  // chosen at run time). Outside digest_meta, so files written before it still verify; empty in them.
  std::string cpu_kernels;
};
// This machine's CPU model name from /proc/cpuinfo ("unknown" without one): /meta's cpu, and part of
// a golden cache entry's key (fp64 results can differ between CPUs' libm).
std::string cpu_model();

Meta collect_meta(const std::string& sweep_file, const std::string& sweep_text, const std::string& command);

struct ResultsContents {
  Meta meta;
  std::vector<ScenarioRow> scenarios;
  std::vector<ResultRow> results;
  std::vector<PerfRow> perf;
  std::map<std::string, std::filesystem::path> dump_files;  // scenario ID -> dump file (absolute)
};

ResultsContents read_results(const std::filesystem::path& path);
void write_results(const std::filesystem::path& path, const ResultsContents& contents);

// Collects rows as scenarios finish and rewrites the file after each one. Thread-safe.
// The results file could not be rewritten (a full disk, a folder gone): the store and the file are
// as they were before the rows that failed.
struct ResultsNotWritten : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ResultsStore {
 public:
  // With resume, the rows already in `path` are kept and reported as done.
  // With resume, a file written from another sweep text is refused unless other_sweep_text_ok.
  ResultsStore(std::filesystem::path path, Meta meta, bool resume, bool other_sweep_text_ok = false);

  bool done(const std::string& scenario_id, const std::string& dut) const;
  // RESULTS.h5.inflight lists the scenarios running now, so a DUT that kills the process (a crashing
  // plugin) leaves its scenario's ID beside the results of everything finished before it.
  void begin(const std::string& scenario_id);
  void end(const std::string& scenario_id);
  // Stores the rows and returns them as stored. A dump that cannot be written never changes a
  // verdict or a metric: the rows of the dumped DUTs say so in their reason. Throws
  // ResultsNotWritten, storing nothing, when the results file cannot be rewritten.
  std::vector<ResultRow> add(const ScenarioRow& scenario, std::vector<ResultRow> rows, const std::vector<PerfRow>& perf,
                             const std::optional<ProblemFile>& dump);
  std::vector<ResultRow> results() const;
  std::size_t scenarios_stored() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  mutable std::mutex mutex_;
  ResultsContents contents_;
  std::vector<std::string> in_flight_;
  void write_in_flight() const;
};

// Whether `path` is an HDF5 file with this harness's /meta (a file `run` or `merge` may replace).
bool looks_like_results_file(const std::filesystem::path& path);

// Joins shard files: rows deduplicated by (scenario, DUT), the first file's meta.
ResultsContents merge_results(const std::vector<std::filesystem::path>& inputs, std::vector<std::string>& warnings);

}  // namespace swa::harness
