#pragma once
// A folder of golden results keyed by content, so a rerun of the same scenarios (CI on every commit,
// a resumed or resharded sweep) reads the inputs, the fp64 golden and the baseline instead of
// drawing and computing them.
//
// Key: SHA-256 of the scenario ID (every parameter of the case), golden::build_id() (the golden's
// sources, compiler and flags), the input generator's build id (its sources, compiler and flags:
// harness/CMakeLists.txt; with the sources of the baseline's errors, metrics and phases), the C library's version and the CPU model (libm's results, which the
// inputs and the golden both use, can differ between them).
// Entry: "<key>.golden" = magic, key, sizes, golden out and LSE (fp64), the baseline's errors
// (fp64: whole output, then per phase), Q, K and V in storage form, an XXH3-128 of all that; then
// the baseline's output (fp32) and an XXH3-128 of the header and it. A hit reads the first part
// only: the baseline's output (a quarter of the bytes) serves dumps, repro and golden files, and
// load_baseline reads it when one is written. A file that fails a check is deleted and recomputed.
// A hit refreshes the entry's modification time. The folder is listed at the first store and again
// whenever this process's count of its bytes (the listing plus what it stored since) goes
// over the size cap, or after 64 stores (to see what other processes added); when the listing is over
// the cap, the least recently used entries are deleted until it is under. (Listing after every store
// made a cold run of N scenarios list O(N^2) files.) Writers go through a temporary and a rename, so
// processes sharing the folder (--jobs, Slurm shards) never read half an entry.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "swa/golden.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/harness/judge/verdict.hpp"

namespace swa::harness {

struct GoldenCacheEntry {
  golden::Output golden;
  BaselineErrors baseline_errors;
  ProblemTensors inputs;
  std::uint64_t baseline_count = 0;  // floats of the baseline's output, for load_baseline
};

struct GoldenCacheCounts {
  std::int64_t hits = 0, stored = 0, corrupt = 0, evicted = 0;
};

class GoldenCache {
 public:
  static constexpr std::int64_t kDefaultMaxBytes = std::int64_t{4} << 30;

  // Creates `dir` when missing; throws std::runtime_error naming it when it cannot. With a `mac_key`
  // (a secret's bytes), entries are named and checked with HMAC-SHA256 under it instead of XXH3:
  // for a folder others can write (README, "Golden cache").
  GoldenCache(std::filesystem::path dir, std::int64_t max_bytes, std::string mac_key = {});

  // $XDG_CACHE_HOME/swa-harness/golden, else $HOME/.cache/swa-harness/golden; nullopt without either.
  static std::optional<std::filesystem::path> default_dir();

  // The entry's key for this scenario.
  static std::string key(const std::string& scenario_id);

  // The entry without the baseline's output, or nullopt when absent or corrupt (a corrupt file is
  // deleted and counted).
  std::optional<GoldenCacheEntry> load(const std::string& key);
  // The baseline's output of the entry `load` gave, or nullopt when the file is gone, holds another
  // size, or its baseline part is corrupt (then deleted and counted).
  std::optional<std::vector<float>> load_baseline(const std::string& key, std::uint64_t count);
  // Stores the entry (never throws: a full disk only loses the cache entry), then evicts.
  void store(const std::string& key, const golden::Output& golden, const std::vector<float>& baseline,
             const BaselineErrors& baseline_errors, const Problem& problem);

  const std::filesystem::path& dir() const { return dir_; }
  std::int64_t max_bytes() const { return max_bytes_; }
  bool keyed() const { return !mac_key_.empty(); }
  GoldenCacheCounts counts() const;

 private:
  std::filesystem::path path_for(const std::string& key) const;
  void evict_locked();
  void discard(const std::filesystem::path& path);  // a corrupt or refused entry: counted, deleted  // lists the folder and deletes the least recently used entries over the cap

  std::filesystem::path dir_;
  std::int64_t max_bytes_;
  std::string mac_key_;  // empty: unkeyed
  std::atomic<std::int64_t> hits_{0}, stored_{0}, corrupt_{0}, evicted_{0};
  std::mutex listing_mutex_;
  std::int64_t listed_bytes_ = -1;   // the folder's bytes at the last listing plus this process's stores since (-1: not listed)
  int stores_since_listing_ = 0;
};

}  // namespace swa::harness
