#include "plugin_dut.hpp"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "abi_convert.hpp"
#include "plugin_symbols.hpp"

namespace swa::dut {
namespace {

using Symbols = PluginSymbols;

// A library loaded once per run and never unloaded: real libraries (ggml) abort in their static
// initialisers when loaded again at the same address. Its calls are serialised: the ABI promises a
// plugin one thread at a time.
struct Loaded {
  Symbols s{};
  std::mutex calls;
};

class PluginDut final : public Dut {
 public:
  PluginDut(std::string path, Loaded& loaded) : path_(std::move(path)), loaded_(loaded), s_(loaded.s) {}

  std::string name() const override { return "plugin:" + path_; }

  Support supports(const AttnParams& p) const override {
    std::lock_guard lock(loaded_.calls);
    const swa_dut_v1_params c = abi::to_c(p);
    char reason[512] = {};
    return s_.supports(&c, reason, sizeof reason) ? Support::yes() : Support::skip(reason);
  }

  Status prefill(const AttnParams& p) override {
    std::lock_guard lock(loaded_.calls);
    const swa_dut_v1_params c = abi::to_c(p);
    swa_dut_v1_error e{};
    return result(s_.prefill(&c, &e), e);
  }

  Status chunked_prefill(const AttnParams& p, KvCache& cache, int chunk_index) override {
    return with_cache(p, cache, s_.chunked_prefill, chunk_index);
  }

  Status decode_step(const AttnParams& p, KvCache& cache, int step) override {
    return with_cache(p, cache, s_.decode_step, step);
  }

 private:
  using CacheCall = int (*)(const swa_dut_v1_params*, swa_dut_v1_cache*, int, swa_dut_v1_error*);
  Status with_cache(const AttnParams& p, KvCache& cache, CacheCall call, int index) const {
    std::lock_guard lock(loaded_.calls);
    const swa_dut_v1_params c = abi::to_c(p);
    abi::CacheView view(cache);
    swa_dut_v1_error e{};
    const int rc = call(&c, &view.c, index, &e);
    view.sync_back(cache);
    return result(rc, e);
  }

  Status result(int rc, const swa_dut_v1_error& e) const {
    if (rc == 0) return Status::success();
    return Status::failure(path_ + " returned " + std::to_string(rc) + " (code " + std::to_string(e.code) +
                           "): " + std::string(e.message, strnlen(e.message, sizeof e.message)));
  }

  std::string path_;
  Loaded& loaded_;
  Symbols s_;
};

Loaded& load_once(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Loaded>> loaded;
  std::lock_guard lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return *it->second;
  Symbols s{};
  if (const std::string error = open_plugin(path, s); !error.empty())
    throw std::runtime_error("plugin " + path + " " + error);
  auto entry = std::make_unique<Loaded>();
  entry->s = s;
  return *loaded.emplace(path, std::move(entry)).first->second;
}

}  // namespace

std::unique_ptr<Dut> load_plugin(const std::string& path) { return std::make_unique<PluginDut>(path, load_once(path)); }

}  // namespace swa::dut
