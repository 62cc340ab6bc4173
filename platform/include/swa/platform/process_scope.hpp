// Descendants that leave a child's process group (setsid, setpgid, a double fork) are still found:
// every child started by platform::Child carries a token in SWA_PROCESS_SCOPE, which its descendants
// inherit through fork and exec, and the processes this process adopts as a subreaper are known by
// their parent. Child ends a child's scope when the child ends (platform/README.md says what that
// guarantees and what it does not).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace swa::platform {

inline constexpr char kScopeVariable[] = "SWA_PROCESS_SCOPE";

// A token no other process hands out: "<pid>x<random>.<n>". Every token of this process starts with
// scope_prefix().
std::string new_scope_token();
std::string scope_prefix();

// The environment entry that gives a child `token`: this process's own SWA_PROCESS_SCOPE tokens
// (a harness run as another harness's DUT keeps its parent's), then `token`, space-separated.
std::string scope_entry(std::string_view inherited, std::string_view token);

// SIGKILL to every process of this user whose environment's SWA_PROCESS_SCOPE names `token`, and to
// every process re-parented to this one (as a subreaper) that it did not start itself; reaps those
// that are its children. Repeats until a round finds none (a process may fork while it is ended).
// Returns how many it ended.
int end_scope(std::string_view token);
// The same for every token this process handed out (an interrupt's clean-up).
int end_every_scope();

// Bookkeeping for the adopted-orphan rule: Child holds this lock across fork() and records the pid,
// so a scan never mistakes a child being started for an orphan.
class StartedChildren {
 public:
  static void lock();
  static void unlock();
  static void add(pid_t pid);     // call with the lock held
  static void remove(pid_t pid);  // after the child is reaped
};

}  // namespace swa::platform
