#pragma once
// A folder of golden results keyed by content, so a rerun of the same scenarios (CI on every commit,
// a resumed or resharded sweep) reads the inputs, the fp64 golden and the baseline instead of
// drawing and computing them.
//
// Key: SHA-256 of the scenario ID (every parameter of the case), golden::build_id() (the golden's
// sources, compiler and flags), the input generator's build id (its sources, compiler and flags:
// harness/CMakeLists.txt), the C library's version and the CPU model (libm's results, which the
// inputs and the golden both use, can differ between them).
// Entry: "<key>.golden" = magic, key, sizes, golden out and LSE (fp64), baseline (fp32), Q, K and V
// in storage form, and an XXH3-128 of all that; a file that fails the check is deleted and
// recomputed. A hit refreshes the entry's modification time; after each store, the least recently
// used entries are deleted until the folder is under its size cap. Writers go through a temporary
// and a rename, so processes sharing the folder (--jobs, Slurm shards) never read half an entry.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "swa/golden.hpp"
#include "swa/harness/problem.hpp"

namespace swa::harness {

struct GoldenCacheEntry {
  golden::Output golden;
  std::vector<float> baseline;
  ProblemTensors inputs;
};

struct GoldenCacheCounts {
  std::int64_t hits = 0, stored = 0, corrupt = 0, evicted = 0;
};

class GoldenCache {
 public:
  static constexpr std::int64_t kDefaultMaxBytes = std::int64_t{4} << 30;

  // Creates `dir` when missing; throws std::runtime_error naming it when it cannot.
  GoldenCache(std::filesystem::path dir, std::int64_t max_bytes);

  // $XDG_CACHE_HOME/swa-harness/golden, else $HOME/.cache/swa-harness/golden; nullopt without either.
  static std::optional<std::filesystem::path> default_dir();

  // The entry's key for this scenario.
  static std::string key(const std::string& scenario_id);

  // The entry, or nullopt when absent or corrupt (a corrupt file is deleted and counted).
  std::optional<GoldenCacheEntry> load(const std::string& key);
  // Stores the entry (never throws: a full disk only loses the cache entry), then evicts.
  void store(const std::string& key, const golden::Output& golden, const std::vector<float>& baseline,
             const Problem& problem);

  const std::filesystem::path& dir() const { return dir_; }
  std::int64_t max_bytes() const { return max_bytes_; }
  GoldenCacheCounts counts() const;

 private:
  std::filesystem::path path_for(const std::string& key) const;
  void evict();

  std::filesystem::path dir_;
  std::int64_t max_bytes_;
  std::atomic<std::int64_t> hits_{0}, stored_{0}, corrupt_{0}, evicted_{0};
};

}  // namespace swa::harness
