#pragma once
// Shared plumbing of the subcommands: option parsing, range checks, exit codes.
#include <boost/program_options.hpp>

#include "swa/harness/judge/golden_cache.hpp"
#include "swa/harness/case/sweep_file.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace swa::cli {

namespace po = boost::program_options;

// 3: a run stopped because its results file could not be written (a full disk); what it holds is intact.
enum ExitCode : int { kOk = 0, kCheckFailed = 1, kBadInput = 2, kNotStored = 3 };

// Bad input: the message names the option and what is allowed. Exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses `args` against `desc` (adding --help). Returns false when --help was printed.
bool parse_options(const std::string& command, const std::vector<std::string>& args,
                   po::options_description& desc, po::variables_map& vm,
                   const po::positional_options_description* positional = nullptr);

std::int64_t require_range(const std::string& option, std::int64_t value, std::int64_t lo, std::int64_t hi);
std::vector<std::int64_t> parse_int_list(const std::string& option, const std::string& text, std::int64_t lo,
                                         std::int64_t hi);

// Parses a choice: `parsed` is the result of a parse_* function; names the option and the choices.
template <class T>
T require_choice(const std::string& option, const std::string& text, const std::optional<T>& parsed,
                 const std::string& choices) {
  if (!parsed) throw UsageError("option " + option + ": '" + text + "' is not one of " + choices);
  return *parsed;
}

std::string human_bytes(std::int64_t bytes);

// "K/N" with 0 <= K < N; empty text is the whole run (0/1).
harness::Shard parse_shard(const std::string& text);

// What an output option writes, so that an existing file of another kind is not replaced.
enum class OutputKind { results, junit };
// Refuses (UsageError), before anything runs, an output that would destroy something: the same file
// as one of `others` (inputs and other outputs, named as in messages), an existing file that is not
// what `option` writes (unless `force`), or a folder that cannot be written.
void guard_output(const std::string& option, const std::string& path, OutputKind kind, bool force,
                  const std::vector<std::pair<std::string, std::string>>& others);

// --dut's value: one exec:'COMMAND ...' (its commas included) or comma-separated names, each once.
std::vector<std::string> parse_dut_option(const std::string& text);
// Throws UsageError, prefixed by `named_by` ("option --dut: "), when no DUT of that name can be made.
// Makes the DUT once with the command's own options (so --dut-timeout bounds a plugin's or a python:
// target's load, and --dut-memory-mb its memory, here too); a bad name or a load failure is a UsageError.
// --dut-memory-mb MB (0: default_worker_memory_bytes for `jobs` workers): what a plugin: or python:
// worker may hold. Returns bytes; out of range is a UsageError.
std::int64_t worker_memory_from_option(std::int64_t mb, int jobs);
inline constexpr char kDutMemoryHelp[] =
    "MiB of its own memory a plugin: or python: DUT's worker may hold; over it the call is an error row (0: half "
    "the RAM shared among --jobs, at least 1024)";

void require_dut_exists(const std::string& dut, const std::string& named_by, const harness::DutOptions& options);

// --golden-cache DIR, --no-golden-cache, --golden-cache-max-mb N, --golden-cache-key FILE:
// harness/README.md, "Golden cache".
struct GoldenCacheArgs {
  std::string dir;
  std::string key_file;
  std::int64_t max_mb = harness::GoldenCache::kDefaultMaxBytes >> 20;
};
void add_golden_cache_options(po::options_description& desc, GoldenCacheArgs& args);
// The checks every command makes of those options before using them, writing nothing: the cap's
// range, --golden-cache with --no-golden-cache, an empty folder name, a path that is not a folder,
// a key file that is not a regular file of 16..4096 bytes readable by its owner alone.
// Throws UsageError naming the option.
void check_golden_cache_options(const po::variables_map& vm, const GoldenCacheArgs& args);
// The cache the options ask for: none with --no-golden-cache; the default folder when it can be made
// (a warning on stderr when not). A --golden-cache that cannot be a folder is a UsageError.
std::unique_ptr<harness::GoldenCache> open_golden_cache(const po::variables_map& vm, const GoldenCacheArgs& args);
// "golden cache DIR: H read, S stored, ..." for stderr at the end of a command.
std::string golden_cache_summary(const harness::GoldenCache& cache);

// Loads and validates a sweep file; its errors (file:line:col: key: message) become UsageError.
harness::SweepFile load_sweep_or_usage_error(const std::string& path, const harness::SweepLoadOptions& options = {});

}  // namespace swa::cli
