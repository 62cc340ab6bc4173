#include "swa/harness/base/interrupt.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "swa/platform/child_process.hpp"
#include "swa/platform/process_scope.hpp"

namespace swa::harness {
namespace {

constexpr int kInterruptSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

struct Registry {
  std::mutex mutex;
  std::set<std::filesystem::path> paths;
  std::set<pid_t> groups;
  std::string hint;
  std::mutex flush_mutex;
  std::function<std::string()> flush;
};
Registry& registry() {
  static Registry r;
  return r;
}

[[noreturn]] void clean_up_and_exit(int sig) {
  Registry& r = registry();
  std::string not_flushed;
  {
    // Before r.mutex: a commit writes a temporary, which registers itself.
    std::lock_guard lock(r.flush_mutex);
    if (r.flush) not_flushed = r.flush();
  }
  std::lock_guard lock(r.mutex);  // held to the end: nothing registers or unregisters meanwhile
  for (pid_t g : r.groups) platform::end_process_group(g);
  platform::end_every_scope();  // what left those groups (setsid, a double fork)
  std::error_code ignored;
  for (const auto& p : r.paths) std::filesystem::remove_all(p, ignored);
  std::cerr << "\nswa-harness: interrupted by SIG" << sigabbrev_np(sig)
            << "; stopped the DUTs' processes and removed their temporary files. "
            << (not_flushed.empty() ? "Every finished scenario is in the results file; "
                                    : "The last finished scenarios could not be stored (" + not_flushed + "); ")
            << r.hint << "\n";
  std::cerr.flush();
  std::_Exit(128 + sig);
}

}  // namespace

void set_interrupt_flush(std::function<std::string()> flush) {
  std::lock_guard lock(registry().flush_mutex);
  registry().flush = std::move(flush);
}

void install_interrupt_handler(std::string resume_hint) {
  registry().hint = std::move(resume_hint);
  // Processes a DUT's command leaves behind are re-parented to the harness, which reaps them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t set;
  sigemptyset(&set);
  // SIGHUP (the terminal closed) and SIGQUIT (Ctrl-\\) end a run as SIGINT and SIGTERM do.
  for (int sig : kInterruptSignals) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    clean_up_and_exit(sig);
  }).detach();
}

TrackedPath::TrackedPath(std::filesystem::path p) : path_(std::move(p)) {
  std::lock_guard lock(registry().mutex);
  registry().paths.insert(path_);
}
TrackedPath::~TrackedPath() {
  std::lock_guard lock(registry().mutex);
  registry().paths.erase(path_);
}

ScratchFolder::ScratchFolder(const std::string& name) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(path_);
  tracked_.emplace(path_);  // an interrupt removes it too
}
ScratchFolder::~ScratchFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

TrackedProcessGroup::TrackedProcessGroup(pid_t pgid) : pgid_(pgid) {
  std::lock_guard lock(registry().mutex);
  registry().groups.insert(pgid_);
}
TrackedProcessGroup::~TrackedProcessGroup() {
  std::lock_guard lock(registry().mutex);
  registry().groups.erase(pgid_);
}

}  // namespace swa::harness
