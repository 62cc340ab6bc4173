#include "swa/harness/base/interrupt.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

namespace swa::harness {
namespace {

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
  for (pid_t g : r.groups) end_process_group(g);
  std::error_code ignored;
  for (const auto& p : r.paths) std::filesystem::remove_all(p, ignored);
  std::cerr << "\nswa-harness: interrupted by " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << "; stopped the DUTs' processes and removed their temporary files. "
            << (not_flushed.empty() ? "Every finished scenario is in the results file; "
                                    : "The last finished scenarios could not be stored (" + not_flushed + "); ")
            << r.hint << "\n";
  std::cerr.flush();
  std::_Exit(128 + sig);
}

}  // namespace

// SIGKILL is delivered asynchronously: without reaping, a DUT process can outlive the call (or the
// harness). Every member of the group is our child (we are their subreaper), so waitpid(-group)
// sees each until it is gone. Bounded: a process in uninterruptible sleep cannot be hurried.
void end_process_group(pid_t pgid) {
  ::kill(-pgid, SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t reaped = ::waitpid(-pgid, nullptr, WNOHANG);
    if (reaped < 0) return;  // ECHILD: nobody of the group is left (another thread may have reaped one)
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

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
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
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

TrackedProcessGroup::TrackedProcessGroup(pid_t pgid) : pgid_(pgid) {
  std::lock_guard lock(registry().mutex);
  registry().groups.insert(pgid_);
}
TrackedProcessGroup::~TrackedProcessGroup() {
  std::lock_guard lock(registry().mutex);
  registry().groups.erase(pgid_);
}

}  // namespace swa::harness
