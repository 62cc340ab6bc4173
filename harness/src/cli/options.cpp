#include "options.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/store/output_guard.hpp"
#include "swa/harness/store/results_file.hpp"

namespace swa::cli {

bool parse_options(const std::string& command, const std::vector<std::string>& args, po::options_description& desc,
                   po::variables_map& vm, const po::positional_options_description* positional) {
  desc.add_options()("help,h", "show this help");
  try {
    auto parser = po::command_line_parser(args).options(desc);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: swa-harness " << command << " [options]\n" << desc << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return true;
}

std::int64_t require_range(const std::string& option, std::int64_t value, std::int64_t lo, std::int64_t hi) {
  if (value < lo || value > hi)
    throw UsageError("option " + option + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got " + std::to_string(value));
  return value;
}

std::vector<std::int64_t> parse_int_list(const std::string& option, const std::string& text, std::int64_t lo,
                                         std::int64_t hi) {
  std::vector<std::int64_t> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      throw UsageError("option " + option + ": '" + item + "' is not an integer (expected a comma-separated list like 5,17)");
    values.push_back(require_range(option, v, lo, hi));
  }
  if (values.empty()) throw UsageError("option " + option + " needs at least one value");
  return values;
}

harness::Shard parse_shard(const std::string& text) {
  if (text.empty()) return {};
  const auto slash = text.find('/');
  if (slash == std::string::npos) throw UsageError("option --shard: expected K/N, got '" + text + "'");
  const auto k = parse_int_list("--shard", text.substr(0, slash), 0, 1 << 20);
  const auto n = parse_int_list("--shard", text.substr(slash + 1), 1, 1 << 20);
  if (k.size() != 1 || n.size() != 1 || k[0] >= n[0])
    throw UsageError("option --shard: expected K/N with 0 <= K < N, got '" + text + "'");
  return {static_cast<int>(k[0]), static_cast<int>(n[0])};
}

std::vector<std::string> parse_dut_option(const std::string& text) {
  if (text.find_first_not_of(" ,") == std::string::npos)
    throw UsageError("option --dut: empty; name at least one DUT (baseline, cpu, cuda, mutant:<fault>, plugin:PATH.so, "
                     "exec:'COMMAND'), or leave --dut out to use the sweeps' duts:");
  // The command is the rest of the value, commas included.
  if (harness::split_dut_label(text).name.rfind("exec:", 0) == 0) return {text};
  std::vector<std::string> duts;
  std::stringstream list(text);
  for (std::string d; std::getline(list, d, ',');) {
    if (d.empty()) throw UsageError("option --dut: '" + text + "' has an empty name between its commas");
    // Two rows for one (scenario, DUT) pair could not be told apart in the results.
    if (std::find(duts.begin(), duts.end(), d) != duts.end())
      throw UsageError("option --dut: '" + d + "' is named twice; name each DUT once");
    duts.push_back(d);
  }
  return duts;
}

std::int64_t worker_memory_from_option(std::int64_t mb, int jobs) {
  require_range("--dut-memory-mb", mb, 0, std::int64_t{1} << 30);
  return mb > 0 ? mb << 20 : harness::default_worker_memory_bytes(jobs);
}

void require_dut_exists(const std::string& dut, const std::string& named_by, const harness::DutOptions& options) {
  try {
    harness::make_dut(dut, options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(named_by + e.what());
  }
}

harness::SweepFile load_sweep_or_usage_error(const std::string& path, const harness::SweepLoadOptions& options) {
  try {
    return harness::load_sweep_file(path, options);
  } catch (const harness::SweepError& e) {
    throw UsageError(e.what());
  }
}

std::string human_bytes(std::int64_t bytes) {
  std::ostringstream o;
  o.precision(3);
  if (bytes >= (std::int64_t{1} << 30)) o << static_cast<double>(bytes) / (1 << 30) << " GiB";
  else if (bytes >= (1 << 20)) o << static_cast<double>(bytes) / (1 << 20) << " MiB";
  else o << bytes << " B";
  return o.str();
}

namespace fs = std::filesystem;

void guard_output(const std::string& option, const std::string& path, OutputKind kind, bool force,
                  const std::vector<std::pair<std::string, std::string>>& others) {
  // The checks are the store layer's, shared with the pytest plugin's --swa-out and --swa-junit.
  try {
    harness::check_output_path(option, path,
                               kind == OutputKind::results ? harness::OutputFileKind::results
                                                           : harness::OutputFileKind::junit,
                               force, others);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

void add_golden_cache_options(po::options_description& desc, GoldenCacheArgs& args) {
  const auto where = harness::GoldenCache::default_dir();
  desc.add_options()
      ("golden-cache", po::value(&args.dir),
       ("folder of golden results keyed by content, read instead of recomputing (default: " +
        (where ? where->string() : std::string("none: neither XDG_CACHE_HOME nor HOME is set")) + ")").c_str())
      ("no-golden-cache", "compute every golden and baseline; read and write no golden cache")
      ("golden-cache-max-mb", po::value(&args.max_mb)->default_value(args.max_mb),
       "size cap of the golden cache folder; the least recently used entries go first")
      ("golden-cache-key", po::value(&args.key_file),
       "secret key file (16..4096 bytes, readable by its owner alone): entries are named and checked with "
       "HMAC-SHA256 under it, so others who can write a shared cache folder cannot forge one");
}

namespace {

// The key's bytes, after the checks check_golden_cache_options names.
std::string read_key_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw UsageError("option --golden-cache-key: " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw UsageError("option --golden-cache-key: " + path + " is not a regular file");
  if ((st.st_mode & 077) != 0)
    throw UsageError("option --golden-cache-key: " + path + " can be read or written by others (mode " +
                     [&] {
                       char mode[8];
                       std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
                       return std::string(mode);
                     }() +
                     "); a key others can read protects nothing: chmod 600 it");
  if (st.st_size < 16 || st.st_size > 4096)
    throw UsageError("option --golden-cache-key: " + path + " holds " + std::to_string(st.st_size) +
                     " bytes; a key is 16..4096 bytes (e.g. head -c 32 /dev/urandom > FILE; chmod 600 FILE)");
  try {
    return harness::read_small_file(path, 4096);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("option --golden-cache-key: ") + e.what());
  }
}

}  // namespace

void check_golden_cache_options(const po::variables_map& vm, const GoldenCacheArgs& args) {
  require_range("--golden-cache-max-mb", args.max_mb, 1, std::int64_t{1} << 30);
  if (vm.count("golden-cache-key")) {
    if (vm.count("no-golden-cache"))
      throw UsageError("options --golden-cache-key and --no-golden-cache: a key is for a cache; give one of them");
    (void)read_key_file(args.key_file);
  }
  if (!vm.count("golden-cache")) return;
  if (vm.count("no-golden-cache")) throw UsageError("options --golden-cache and --no-golden-cache: give one of them");
  if (args.dir.empty()) throw UsageError("option --golden-cache: empty folder name");
  std::error_code ec;
  if (fs::exists(args.dir, ec) && !fs::is_directory(args.dir, ec))
    throw UsageError("option --golden-cache: " + args.dir + " is not a folder");
}

std::unique_ptr<harness::GoldenCache> open_golden_cache(const po::variables_map& vm, const GoldenCacheArgs& args) {
  check_golden_cache_options(vm, args);  // the key file's checks included
  if (vm.count("no-golden-cache")) return nullptr;
  const std::int64_t cap = args.max_mb << 20;
  const std::string key = vm.count("golden-cache-key") ? read_key_file(args.key_file) : std::string();
  if (vm.count("golden-cache")) {
    try {
      return std::make_unique<harness::GoldenCache>(args.dir, cap, key);
    } catch (const std::runtime_error& e) {
      throw UsageError("option --golden-cache: " + std::string(e.what()));
    }
  }
  const auto where = harness::GoldenCache::default_dir();
  if (!where) return nullptr;
  try {
    return std::make_unique<harness::GoldenCache>(*where, cap, key);
  } catch (const std::runtime_error& e) {
    std::cerr << "swa-harness: warning: running without a golden cache: " << e.what() << "\n";
    return nullptr;
  }
}

std::string golden_cache_summary(const harness::GoldenCache& cache) {
  const harness::GoldenCacheCounts c = cache.counts();
  std::string s = "golden cache " + cache.dir().string() + (cache.keyed() ? " (keyed)" : "") + ": " +
                  std::to_string(c.hits) + " read, " +
                  std::to_string(c.stored) + " computed and stored";
  if (c.corrupt) s += ", " + std::to_string(c.corrupt) + " corrupt entries deleted and recomputed";
  if (c.evicted) s += ", " + std::to_string(c.evicted) + " evicted (cap " + human_bytes(cache.max_bytes()) + ")";
  return s;
}

}  // namespace swa::cli
