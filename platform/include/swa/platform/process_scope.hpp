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

// Who this process is, so that a later process can tell whether it still runs even after its pid
// was taken by another: "<pid>-<start>-<pidns>", its pid, its start time (clock ticks after boot,
// field 22 of /proc/PID/stat) and the inode of its pid namespace (a pid of another namespace is
// not this one's to judge). Read again in a forked child.
std::string owner_tag();
// Whether the process an owner_tag() names still runs: dead when its pid is gone, is a zombie, or
// names a process started at another time; unknown when the tag is not one, or of another pid
// namespace, or /proc does not say.
enum class OwnerState { alive, dead, unknown };
OwnerState owner_state(std::string_view tag);

// A token no other process hands out: "<owner_tag()>x<random>.<n>", so that the token names the
// process that handed it out. Every token of this process starts with scope_prefix().
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
// SIGKILL to every process of this user whose SWA_PROCESS_SCOPE holds a token whose owner is dead
// (owner_state): what a harness killed outright (kill -9, the OOM killer) left behind, a shell's
// children and setsid daemons that its exec DUT's call started. Tokens this process inherited are
// left alone (it is in those scopes itself), and so are tokens of another form or pid namespace and
// every live owner's: another harness run on the machine is not touched. Those that are this
// process's children are reaped. With `only_with` ("NAME=value"), only processes whose environment
// has that entry (for tests). Returns how many it ended. One /proc scan, as end_scope.
int end_orphaned_scopes(std::string_view only_with = {});

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
