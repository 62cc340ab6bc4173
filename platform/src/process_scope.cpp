#include "swa/platform/process_scope.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
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

// Every token of the SWA_PROCESS_SCOPE entry of an environment block.
std::vector<std::string_view> scope_tokens(const std::string& environ) {
  std::vector<std::string_view> tokens;
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
      if (stop > t) tokens.push_back(entry.substr(t, stop - t));
      t = stop + 1;
    }
  }
  return tokens;
}

// Whether the environment block (NUL-separated entries) gives SWA_PROCESS_SCOPE a token that is
// `token`, or with `prefix_only` one that starts with it.
bool environment_names(const std::string& environ, std::string_view token, bool prefix_only) {
  for (const std::string_view one : scope_tokens(environ))
    if (prefix_only ? one.substr(0, token.size()) == token : one == token) return true;
  return false;
}

// Whether the environment block has the entry `entry` ("NAME=value") exactly.
bool environment_has(const std::string& environ, std::string_view entry) {
  for (std::size_t at = 0; at < environ.size();) {
    const std::size_t end = std::min(environ.find('\0', at), environ.size());
    if (std::string_view(environ.data() + at, end - at) == entry) return true;
    at = end + 1;
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

// This process's identity, read once per process (a forked child that starts children reads its own).
struct Identity {
  pid_t pid = -1;
  std::string tag, prefix;
};
std::mutex& identity_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

// Field 22 of /proc/PID/stat, the start time in clock ticks after boot (0: unreadable).
unsigned long long start_ticks_of(const std::string& stat) {
  const std::size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  unsigned long long ticks = 0;
  return fields >> ticks ? ticks : 0;
}

unsigned long long pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

const Identity& identity() {
  static Identity* cached = new Identity;
  std::lock_guard lock(identity_mutex());
  const pid_t self = ::getpid();
  if (cached->pid != self) {
    const unsigned long long start = start_ticks_of(read_proc_file(AT_FDCWD, "/proc/self/stat"));
    char text[96];
    std::snprintf(text, sizeof text, "%ld-%llu-%llu", static_cast<long>(self), start, pid_namespace());
    std::random_device random;
    char prefix[160];
    std::snprintf(prefix, sizeof prefix, "%sx%08x%08x.", text, random(), random());
    // Replaced, not changed in place: a reference handed out before a fork stays valid.
    cached = new Identity{self, text, prefix};
  }
  return *cached;
}

// Parses the whole of `tag`, "<pid>-<start>-<pidns>".
struct ParsedTag {
  bool ok = false;
  long pid = 0;
  unsigned long long start = 0, ns = 0;
};
ParsedTag parse_tag(std::string_view tag) {
  ParsedTag p;
  unsigned long long parts[3] = {0, 0, 0};
  std::size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const std::size_t stop = i < 2 ? tag.find('-', at) : tag.size();
    if (stop == std::string_view::npos || stop == at || stop - at > 19) return p;
    for (std::size_t c = at; c < stop; ++c) {
      if (tag[c] < '0' || tag[c] > '9') return p;
      parts[i] = parts[i] * 10 + static_cast<unsigned>(tag[c] - '0');
    }
    at = stop + 1;
  }
  if (parts[0] == 0 || parts[0] > 0x7fffffff || parts[1] == 0) return p;
  return {true, static_cast<long>(parts[0]), parts[1], parts[2]};
}


// The owner part of a token "<pid>-<start>-<pidns>x<random>.<n>" (empty for tokens of another form,
// such as those of harnesses built before tokens named their owner).
std::string_view owner_of_token(std::string_view token) {
  const std::size_t x = token.find('x');
  return x == std::string_view::npos ? std::string_view{} : token.substr(0, x);
}

// One pass of end_orphaned_scopes: SIGKILL to each process of this user (and with the entry
// `only_with`) that carries a token of a dead owner and is not yet in `signalled`.
int end_orphans_round(std::string_view only_with, std::set<pid_t>& signalled, std::vector<pid_t>& children) {
  const pid_t self = ::getpid();
  const uid_t uid = ::getuid();
  // A token this process inherited names its own ancestors' scope: this process is in it too, and
  // ending it is their business (or its own parent's), not this process's.
  const char* own_env = ::getenv(kScopeVariable);
  const std::string own = std::string(kScopeVariable) + "=" + (own_env ? own_env : "") + std::string(1, '\0');
  const std::vector<std::string_view> inherited = scope_tokens(own);
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  int ended = 0;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self || signalled.count(static_cast<pid_t>(pid))) continue;
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
    if (pidfd < 0 && errno == ESRCH) continue;
    const int dir_fd = ::openat(::dirfd(proc), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool end_it = false, child_of_self = false;
    struct stat st {};
    if (dir_fd >= 0 && ::fstat(dir_fd, &st) == 0 && st.st_uid == uid) {
      const std::string environ = read_proc_file(dir_fd, "environ");
      const bool wanted = only_with.empty() || environment_has(environ, only_with);
      for (const std::string_view token : wanted ? scope_tokens(environ) : std::vector<std::string_view>{}) {
        if (std::find(inherited.begin(), inherited.end(), token) != inherited.end()) continue;
        const std::string_view owner = owner_of_token(token);
        if (!owner.empty() && owner_state(owner) == OwnerState::dead) {
          end_it = true;
          break;
        }
      }
      if (end_it) child_of_self = lineage_of(read_proc_file(dir_fd, "stat")).parent == self;
    }
    if (dir_fd >= 0) ::close(dir_fd);
    if (end_it) {
      if (pidfd < 0 || ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) != 0)
        ::kill(static_cast<pid_t>(pid), SIGKILL);
      signalled.insert(static_cast<pid_t>(pid));
      if (child_of_self) children.push_back(static_cast<pid_t>(pid));
      ++ended;
    }
    if (pidfd >= 0) ::close(pidfd);
  }
  ::closedir(proc);
  return ended;
}

}  // namespace

std::string owner_tag() { return identity().tag; }

OwnerState owner_state(std::string_view tag) {
  const ParsedTag p = parse_tag(tag);
  if (!p.ok || p.ns != pid_namespace() || pid_namespace() == 0) return OwnerState::unknown;
  const std::string dir = "/proc/" + std::to_string(p.pid);
  const std::string stat = read_proc_file(AT_FDCWD, (dir + "/stat").c_str());
  if (stat.empty()) {
    // No /proc entry: gone, unless /proc hides it (hidepid) and the pid still runs.
    if (::kill(static_cast<pid_t>(p.pid), 0) != 0 && errno == ESRCH) return OwnerState::dead;
    return OwnerState::unknown;
  }
  const unsigned long long start = start_ticks_of(stat);
  if (start == 0) return OwnerState::unknown;
  if (start != p.start) return OwnerState::dead;  // its pid taken by a later process
  // A zombie (killed, not yet reaped by its parent) runs nothing any more: its scopes are orphaned.
  const std::size_t paren = stat.rfind(')');
  const char state = paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '?';
  return state == 'Z' || state == 'X' ? OwnerState::dead : OwnerState::alive;
}

std::string scope_prefix() { return identity().prefix; }

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

int end_orphaned_scopes(std::string_view only_with) {
  std::set<pid_t> signalled;
  std::vector<pid_t> children;
  int ended = 0;
  // A process forking while it is ended can leave a new one (with the same tokens): look again.
  for (int round = 0; round < 100; ++round) {
    const int now = end_orphans_round(only_with, signalled, children);
    if (now == 0) break;
    ended += now;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Those re-parented to this process (a subreaper) are reaped; bounded, as in end_matching.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (pid_t pid : children)
    while (::waitpid(pid, nullptr, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return ended;
}
int end_every_scope() { return end_matching(scope_prefix(), true); }

void StartedChildren::lock() { started_mutex().lock(); }
void StartedChildren::unlock() { started_mutex().unlock(); }
void StartedChildren::add(pid_t pid) { started().insert(pid); }
void StartedChildren::remove(pid_t pid) {
  std::lock_guard lock(started_mutex());
  started().erase(pid);
}

}  // namespace swa::platform
