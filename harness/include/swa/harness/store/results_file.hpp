#pragma once
// The results HDF5 file: /meta, /scenarios, /results and /dumps (layout in harness/README.md).
//
// Crash safety: the whole file is written to a temporary and renamed into place, so at any instant,
// kill -9 included, the path holds a complete, readable file (results_store.hpp says when). Dumps are problem files (problem_file.hpp), written once each to
// RESULTS.h5.dumps/ and linked from /dumps/<ID> by HDF5 external links (h5py follows them).
#include <filesystem>
#include <map>
#include <stdexcept>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "swa/harness/case/problem_file.hpp"
#include "swa/harness/judge/results.hpp"

namespace swa::harness {

struct Meta {
  std::string tool_version, git_commit, compiler, host, cpu, gpu, start_time, sweep_file, sweep_text, command;
  // The CPU DUT's instruction paths in this process (Eigen's SIMD sets, the fp16/bf16 conversion
  // chosen at run time). Outside digest_meta, so files written before it still verify; empty in them.
  std::string cpu_kernels;
};

struct ResultsContents {
  Meta meta;
  std::vector<ScenarioRow> scenarios;
  std::vector<ResultRow> results;
  std::vector<PerfRow> perf;
  std::map<std::string, std::filesystem::path> dump_files;  // scenario ID -> dump file (absolute)
};

ResultsContents read_results(const std::filesystem::path& path);
// A row's cells by their /results column names, in the file's order, as the file holds them (the
// status by its verdict's name): for the Python module's judge(), which returns what run writes.
using ResultCell = std::variant<std::string, std::int64_t, double>;
std::vector<std::pair<std::string, ResultCell>> result_cells(const ResultRow& row);
void write_results(const std::filesystem::path& path, const ResultsContents& contents);

// RESULTS.h5.dumps/, the folder of a results file's dumps, and a dump's file name in it.
std::filesystem::path dumps_dir(const std::filesystem::path& results);
std::string dump_file_name(const std::string& scenario_id);

// Whether `path` is an HDF5 file with this harness's /meta (a file `run` or `merge` may replace).
bool looks_like_results_file(const std::filesystem::path& path);

// Joins shard files: rows deduplicated by (scenario, DUT), the first file's meta.
ResultsContents merge_results(const std::vector<std::filesystem::path>& inputs, std::vector<std::string>& warnings);

}  // namespace swa::harness
