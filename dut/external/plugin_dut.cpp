#include "swa/dut/plugin_dut.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "abi_convert.hpp"
#include "plugin_abi.hpp"

namespace swa::dut {
namespace {

// A library loaded once per run and never unloaded: real libraries (ggml) abort in their static
// initialisers when loaded again at the same address. Its calls are serialised: the ABI promises a
// plugin one thread at a time.
struct Loaded {
  BoundPlugin plugin;
  std::mutex calls;
};

// A plugin that calls exit() inside a call would end the harness with the plugin's status, 0 for
// exit(0): a green CI job without results. exit() runs the atexit handlers in the calling thread,
// so the thread's mark tells that it came from inside a plugin call.
thread_local const std::string* calling_plugin = nullptr;

void refuse_exit_inside_a_plugin() {
  if (!calling_plugin) return;
  const std::string message = "\nswa-harness: the " + *calling_plugin +
                              " called exit() inside a call (--in-process): a plugin must return an error "
                              "instead. Exit status 2; the results file holds the rows stored before.\n";
  if (::write(2, message.data(), message.size()) < 0) {
  }
  ::_exit(2);
}

// exit() runs the atexit handlers and the static destructors last registered first. A static first
// used after the guard was registered (a table the run builds mid-sweep) would be destroyed before
// the guard ran, under threads that still use it: a SIGSEGV instead of exit 2, seen once under a
// loaded suite. The guard is registered again as each call starts, so that it runs first; a few
// thousand times at most (the statics a run makes are made in its first calls).
void guard_runs_first() {
  static std::atomic<int> registrations{0};
  if (registrations.fetch_add(1, std::memory_order_relaxed) < 4096) std::atexit(refuse_exit_inside_a_plugin);
}

// Marks the calling thread as inside a plugin ("plugin PATH", or a hosting's label) for the scope.
struct InsideCall {
  explicit InsideCall(const std::string& subject) {
    guard_runs_first();
    calling_plugin = &subject;
  }
  ~InsideCall() { calling_plugin = nullptr; }
  InsideCall(const InsideCall&) = delete;
  InsideCall& operator=(const InsideCall&) = delete;
};

class PluginDut final : public Dut {
 public:
  PluginDut(const std::string& path, const PluginHosting& hosting, Loaded& loaded)
      : name_(hosting.name(path)),
        path_(hosting.label.empty() ? path : hosting.label),
        subject_(hosting.subject(path)),
        loaded_(loaded),
        plugin_(loaded.plugin) {}

  std::string name() const override { return name_; }
  Traits traits() const override { return abi::to_traits(plugin_.traits()); }
  std::optional<double> last_kernel_ms() const override { return last_kernel_ms_; }

  Support supports(const AttnParams& p) const override {
    if (const std::string outside = abi::outside_traits(plugin_.traits(), p); !outside.empty())
      return Support::skip(outside);
    std::lock_guard lock(loaded_.calls);
    const InsideCall inside(subject_);
    const swa_dut_v2_params c = abi::to_c(p);
    swa_dut_v2_status status = fresh_status();
    return plugin_.supports(c, status)
               ? Support::yes()
               : Support::skip(std::string(status.message, strnlen(status.message, sizeof status.message)));
  }

  Status prefill(const AttnParams& p) override {
    std::lock_guard lock(loaded_.calls);
    const InsideCall inside(subject_);
    const swa_dut_v2_params c = abi::to_c(p);
    swa_dut_v2_status status = fresh_status();
    return result(plugin_.prefill(c, status), status);
  }

  Status chunked_prefill(const AttnParams& p, KvCache& cache, int chunk_index) override {
    return with_cache(p, cache, &BoundPlugin::chunked_prefill, chunk_index);
  }

  Status decode_step(const AttnParams& p, KvCache& cache, int step) override {
    return with_cache(p, cache, &BoundPlugin::decode_step, step);
  }

 private:
  using CacheCall = int (BoundPlugin::*)(const swa_dut_v2_params&, swa_dut_v2_cache&, int, swa_dut_v2_status&) const;
  Status with_cache(const AttnParams& p, KvCache& cache, CacheCall call, int index) {
    std::lock_guard lock(loaded_.calls);
    const InsideCall inside(subject_);
    const swa_dut_v2_params c = abi::to_c(p);
    abi::CacheView view(cache);
    swa_dut_v2_status status = fresh_status();
    const int rc = (plugin_.*call)(c, view.c, index, status);
    view.sync_back(cache);
    return result(rc, status);
  }

  Status result(int rc, const swa_dut_v2_status& s) {
    last_kernel_ms_.reset();
    if (s.kernel_ms >= 0) last_kernel_ms_ = s.kernel_ms;
    if (rc == 0) return Status::success();
    return Status::failure(path_ + " returned " + std::to_string(rc) + " (code " + std::to_string(s.code) +
                           "): " + std::string(s.message, strnlen(s.message, sizeof s.message)));
  }

  std::string name_;
  std::string path_;     // what "returned N" messages start with: the path, or the hosting's label
  std::string subject_;  // "plugin PATH", or the hosting's label: what called exit()
  Loaded& loaded_;
  const BoundPlugin& plugin_;
  std::optional<double> last_kernel_ms_;
};

Loaded& load_once(const std::string& path, const PluginHosting& hosting) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Loaded>> loaded;
  std::lock_guard lock(mutex);
  static const int guard_registered = std::atexit(refuse_exit_inside_a_plugin);
  (void)guard_registered;
  const std::string key = hosting.key(path);
  if (auto it = loaded.find(key); it != loaded.end()) return *it->second;
  for (const std::string& e : hosting.env) {
    const auto eq = e.find('=');
    ::setenv(e.substr(0, eq).c_str(), eq == std::string::npos ? "" : e.c_str() + eq + 1, 1);
  }
  auto entry = std::make_unique<Loaded>();
  const std::string subject = hosting.subject(path);
  const InsideCall inside(subject);  // its static initialisers run now
  if (const std::string error = entry->plugin.open(path); !error.empty())
    throw std::runtime_error(subject + " " + error);
  return *loaded.emplace(key, std::move(entry)).first->second;
}

}  // namespace

std::unique_ptr<Dut> load_plugin(const std::string& path, const PluginHosting& hosting) {
  return std::make_unique<PluginDut>(path, hosting, load_once(path, hosting));
}

}  // namespace swa::dut
