#include "plugin_dut.hpp"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "abi_convert.hpp"

namespace swa::dut {
namespace {

struct Symbols {
  uint32_t (*abi_version)();
  const char* (*name)();
  int (*supports)(const swa_dut_v1_params*, char*, size_t);
  int (*prefill)(const swa_dut_v1_params*, swa_dut_v1_error*);
  int (*chunked_prefill)(const swa_dut_v1_params*, swa_dut_v1_cache*, int, swa_dut_v1_error*);
  int (*decode_step)(const swa_dut_v1_params*, swa_dut_v1_cache*, int, swa_dut_v1_error*);
};

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

template <class F>
void bind(void* handle, const std::string& path, const char* symbol, F& out) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (!p) {
    dlclose(handle);
    throw std::runtime_error("plugin " + path + " does not export " + symbol +
                             " (every swa_dut_v1_* function of swa/dut_v1.h is required)");
  }
  out = reinterpret_cast<F>(p);
}

Loaded& load_once(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Loaded>> loaded;
  std::lock_guard lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return *it->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw std::runtime_error("cannot load plugin " + path + ": " + dlerror());
  Symbols s{};
  bind(handle, path, "swa_dut_v1_abi_version", s.abi_version);
  if (const uint32_t v = s.abi_version(); v != SWA_DUT_V1_ABI_VERSION) {
    dlclose(handle);
    throw std::runtime_error("plugin " + path + " speaks ABI version " + std::to_string(v) + "; this harness speaks " +
                             std::to_string(SWA_DUT_V1_ABI_VERSION));
  }
  bind(handle, path, "swa_dut_v1_name", s.name);
  bind(handle, path, "swa_dut_v1_supports", s.supports);
  bind(handle, path, "swa_dut_v1_prefill", s.prefill);
  bind(handle, path, "swa_dut_v1_chunked_prefill", s.chunked_prefill);
  bind(handle, path, "swa_dut_v1_decode_step", s.decode_step);
  auto entry = std::make_unique<Loaded>();
  entry->s = s;
  return *loaded.emplace(path, std::move(entry)).first->second;
}

}  // namespace

std::unique_ptr<Dut> load_plugin(const std::string& path) { return std::make_unique<PluginDut>(path, load_once(path)); }

}  // namespace swa::dut
