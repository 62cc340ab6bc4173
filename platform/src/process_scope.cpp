#include "swa/platform/process_scope.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace swa::platform {
namespace {

// Never destroyed: a Child held in a static object ends after exit() has run this file's destructors.
std::mutex& started_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::set<pid_t>& started() {
  static auto* s = new std::set<pid_t>;
  return *s;
}

// The whole of a small /proc file (environ, stat); empty when it cannot be read.
std::string read_proc_file(int dir_fd, const char* name) {
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buffer[8192];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got <= 0 || text.size() > (std::size_t{4} << 20)) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return text;
}

// Whether the environment block (NUL-separated entries) gives SWA_PROCESS_SCOPE a token that is
// `token`, or with `prefix_only` one that starts with it.
bool environment_names(const std::string& environ, std::string_view token, bool prefix_only) {
  const std::string_view entry_start = std::string_view(kScopeVariable);
  for (std::size_t at = 0; at < environ.size();) {
    const std::size_t end = std::min(environ.find('\0', at), environ.size());
    std::string_view entry(environ.data() + at, end - at);
    at = end + 1;
    if (entry.size() <= entry_start.size() || entry.substr(0, entry_start.size()) != entry_start ||
        entry[entry_start.size()] != '=')
      continue;
    entry.remove_prefix(entry_start.size() + 1);
    for (std::size_t t = 0; t < entry.size();) {
      const std::size_t stop = std::min(entry.find(' ', t), entry.size());
      const std::string_view one = entry.substr(t, stop - t);
      if (prefix_only ? one.substr(0, token.size()) == token : one == token) return true;
      t = stop + 1;
    }
  }
  return false;
}

// The parent and the process group in /proc/PID/stat (the fields after the state, after the
// command's closing paren).
struct Lineage {
  pid_t parent = -1, group = -1;
};
Lineage lineage_of(const std::string& stat) {
  const std::size_t paren = stat.rfind(')');
  int ppid = -1, pgrp = -1;
  char state = 0;
  if (paren == std::string::npos || std::sscanf(stat.c_str() + paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3)
    return {};
  return {ppid, pgrp};
}

// One pass over /proc: SIGKILL to each process in the scope (or adopted and not started here) that
// `signalled` does not hold yet. Returns how many it signalled; `adopted` gets those that are this
// process's children.
int end_round(std::string_view token, bool prefix_only, std::set<pid_t>& signalled, std::vector<pid_t>& adopted) {
  const pid_t self = ::getpid(), own_group = ::getpgrp();
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  int ended = 0;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self || signalled.count(static_cast<pid_t>(pid))) continue;
    // A pidfd first: what is read next belongs to this process, not to one that took its pid later.
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
    if (pidfd < 0 && errno == ESRCH) continue;
    const int dir_fd = ::openat(::dirfd(proc), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool end_it = false, child_of_self = false;
    if (dir_fd >= 0) {
      const Lineage lineage = lineage_of(read_proc_file(dir_fd, "stat"));
      child_of_self = lineage.parent == self;
      // Adopted: a child this process did not start through Child and that is not in its own process
      // group. What it forks itself outside Child (a sanitizer's symbolizer, an in-process plugin's
      // helper) stays in its group and is not touched; a Child's descendants are in the Child's group
      // or a session of their own.
      const bool orphan =
          child_of_self && !started().count(static_cast<pid_t>(pid)) && lineage.group != own_group;
      end_it = orphan || environment_names(read_proc_file(dir_fd, "environ"), token, prefix_only);
      ::close(dir_fd);
    }
    if (end_it) {
      if (pidfd < 0 || ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) != 0)
        ::kill(static_cast<pid_t>(pid), SIGKILL);
      signalled.insert(static_cast<pid_t>(pid));
      if (child_of_self) adopted.push_back(static_cast<pid_t>(pid));
      ++ended;
    }
    if (pidfd >= 0) ::close(pidfd);
  }
  ::closedir(proc);
  return ended;
}

int end_matching(std::string_view token, bool prefix_only) {
  std::set<pid_t> signalled;
  std::vector<pid_t> adopted;
  int ended = 0;
  {
    std::lock_guard lock(started_mutex());
    // A process forking while it is ended can leave a new one: look again until a round finds none.
    for (int round = 0; round < 100; ++round) {
      const int now = end_round(token, prefix_only, signalled, adopted);
      if (now == 0) break;
      ended += now;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  // Reap what was this process's child; bounded, as a process in uninterruptible sleep is not hurried.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (pid_t pid : adopted)
    while (::waitpid(pid, nullptr, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return ended;
}

}  // namespace

std::string scope_prefix() {
  static const std::string& prefix = *new std::string([] {
    std::random_device random;
    char text[64];
    std::snprintf(text, sizeof text, "%ldx%08x%08x.", static_cast<long>(::getpid()), random(), random());
    return std::string(text);
  }());
  return prefix;
}

std::string new_scope_token() {
  static std::atomic<unsigned long> counter{0};
  return scope_prefix() + std::to_string(counter++);
}

std::string scope_entry(std::string_view inherited, std::string_view token) {
  std::string entry = std::string(kScopeVariable) + "=";
  if (!inherited.empty()) entry.append(inherited).append(" ");
  return entry.append(token);
}

int end_scope(std::string_view token) { return end_matching(token, false); }
int end_every_scope() { return end_matching(scope_prefix(), true); }

void StartedChildren::lock() { started_mutex().lock(); }
void StartedChildren::unlock() { started_mutex().unlock(); }
void StartedChildren::add(pid_t pid) { started().insert(pid); }
void StartedChildren::remove(pid_t pid) {
  std::lock_guard lock(started_mutex());
  started().erase(pid);
}

}  // namespace swa::platform
