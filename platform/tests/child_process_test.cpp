// What every child of the harness can rely on, and what the harness can rely on of a child's end.
#define BOOST_TEST_MODULE child_process
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

#include "swa/platform/child_process.hpp"
#include "swa/platform/lock_file.hpp"
#include "swa/platform/process_scope.hpp"

extern char** environ;

using swa::platform::Child;
using swa::platform::ChildSpec;
using swa::platform::Ending;
using swa::platform::run_to_end;
using swa::platform::Stream;

namespace {

ChildSpec shell(const std::string& script) {
  ChildSpec s;
  s.argv = {"/bin/sh", "-c", script};
  return s;
}

// Whether `pid` is gone: no process, or a zombie nobody has reaped yet.
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const auto close_paren = text.rfind(')');
  return close_paren != std::string::npos && text.size() > close_paren + 2 && text[close_paren + 2] == 'Z';
}

// As the harness is: orphaned descendants come back to this process, which reaps them.
struct Subreaper {
  Subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
};
BOOST_TEST_GLOBAL_FIXTURE(Subreaper);

}  // namespace

BOOST_AUTO_TEST_CASE(exit_status_and_both_streams_are_captured) {
  const auto f = run_to_end(shell("echo to-stdout; echo to-stderr >&2; exit 3"), 20.0);
  BOOST_TEST((f.ending.kind == Ending::Kind::exited));
  BOOST_TEST(f.ending.code == 3);
  BOOST_TEST(f.ending.describe() == "exited with status 3");
  BOOST_TEST(f.output.find("to-stdout") != std::string::npos);
  BOOST_TEST(f.output.find("to-stderr") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_crash_is_named_by_its_signal) {
  const auto f = run_to_end(shell("kill -SEGV $$"), 20.0);
  BOOST_TEST((f.ending.kind == Ending::Kind::killed_by_signal));
  BOOST_TEST(f.ending.code == SIGSEGV);
  BOOST_TEST(f.ending.describe() == "was killed by signal 11 (Segmentation fault)");
  BOOST_TEST(f.ending.shell_status() == 128 + SIGSEGV);
}

BOOST_AUTO_TEST_CASE(a_program_that_cannot_be_run_exits_127) {
  ChildSpec s;
  s.argv = {"/nonexistent/swa-no-such-program"};
  BOOST_TEST(run_to_end(s, 20.0).ending.code == 127);
}

BOOST_AUTO_TEST_CASE(a_time_out_ends_the_whole_group) {
  // The shell starts a grandchild that would outlive it, says its pid, and waits.
  Child c = Child::start(shell("sleep 300 & echo $!; wait"));
  const auto t0 = std::chrono::steady_clock::now();
  const Ending e = c.wait(0.5);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST((e.kind == Ending::Kind::timed_out));
  BOOST_TEST(e.describe() == "timed out after 0.5 s");
  BOOST_TEST(took < 10.0);
  const pid_t grandchild = std::stoi(c.output());
  BOOST_TEST(gone(grandchild));
}

BOOST_AUTO_TEST_CASE(what_the_leader_leaves_behind_in_its_group_is_ended_with_it) {
  // The leader exits at once; its grandchild holds the capture pipe open, which must not hold up the wait.
  Child c = Child::start(shell("sleep 300 & echo $!"));
  const auto t0 = std::chrono::steady_clock::now();
  const Ending e = c.wait(60.0);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST(e.ok());
  BOOST_TEST(took < 10.0);
  BOOST_TEST(gone(std::stoi(c.output())));
}

BOOST_AUTO_TEST_CASE(a_child_starts_with_no_blocked_or_ignored_signals) {
  // The harness blocks SIGINT/SIGTERM for its sigwait thread; a careless parent ignores SIGHUP.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  struct sigaction ignore {}, old_hup {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGHUP, &ignore, &old_hup);
  ChildSpec s;
  s.argv = {"grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"};  // not through sh: dash clears its mask itself
  const auto f = run_to_end(s, 20.0);
  sigaction(SIGHUP, &old_hup, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  BOOST_TEST(f.ending.ok());
  BOOST_TEST(f.output == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

BOOST_AUTO_TEST_CASE(only_the_standard_streams_and_the_passed_fds_stay_open) {
  const int leaked = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC: would leak without the helper
  int passed[2];
  BOOST_REQUIRE(::pipe(passed) == 0);
  // The shell's own fds 0..255, each looked up by stat (a listing would open a descriptor of its own).
  ChildSpec s = shell("i=0; while [ $i -lt 256 ]; do [ -e /proc/$$/fd/$i ] && printf '%s ' $i; i=$((i+1)); done");
  s.pass_fds = {passed[1]};
  const auto f = run_to_end(s, 20.0);
  ::close(leaked);
  ::close(passed[0]);
  ::close(passed[1]);
  BOOST_TEST(f.ending.ok());
  BOOST_TEST(f.output == "0 1 2 3 ");
}

BOOST_AUTO_TEST_CASE(stdin_is_empty) {
  const auto f = run_to_end(shell("cat; echo read-all"), 20.0);
  BOOST_TEST(f.ending.ok());
  BOOST_TEST(f.output == "read-all\n");
}

BOOST_AUTO_TEST_CASE(captured_output_keeps_its_last_bytes_within_the_limit) {
  ChildSpec s = shell("head -c 3000000 /dev/zero | tr '\\0' a; echo END");
  s.capture_limit = 1000;
  Child c = Child::start(s);
  BOOST_TEST(c.wait(60.0).ok());
  BOOST_TEST(c.output().size() == 1000u);
  BOOST_TEST(c.output().substr(996) == "END\n");
  BOOST_TEST(c.output_dropped() == 3000004u - 1000u);
  BOOST_TEST(c.output_tail(4) == "...END\n");
}

BOOST_AUTO_TEST_CASE(a_long_lived_childs_output_is_read_while_it_runs_and_can_be_cleared) {
  // More than a pipe holds, then a line after it: only a reader that drains the pipe lets it through.
  ChildSpec s = shell("head -c 300000 /dev/zero | tr '\\0' a; echo; echo DONE; exec sleep 60");
  s.capture_limit = 1000;
  Child c = Child::start(s);
  for (int i = 0; i < 2000 && c.output().find("DONE") == std::string::npos; ++i) {
    c.read_output_now();
    usleep(5000);
  }
  BOOST_TEST(c.running());
  BOOST_TEST(c.output().find("DONE\n") != std::string::npos);
  BOOST_TEST(c.output_dropped() > 0u);
  c.clear_output();
  BOOST_TEST(c.output().empty());
  BOOST_TEST(c.output_dropped() == 0u);
  BOOST_TEST(c.output_fd() >= 0);
  c.kill();
  BOOST_TEST(c.output_fd() == -1);
}

BOOST_AUTO_TEST_CASE(discarded_and_joined_streams) {
  ChildSpec s = shell("echo to-stdout; echo to-stderr >&2");
  s.stderr_to = Stream::discard;
  BOOST_TEST(run_to_end(s, 20.0).output == "to-stdout\n");
  s.stderr_to = Stream::capture;
  s.stdout_to = Stream::join_stderr;
  BOOST_TEST(run_to_end(s, 20.0).output == "to-stdout\nto-stderr\n");
}

BOOST_AUTO_TEST_CASE(a_body_runs_in_the_forked_child) {
  ChildSpec s;
  s.body = [] {
    const char text[] = "from the body";
    return ::write(1, text, sizeof text - 1) == sizeof text - 1 ? 5 : 1;
  };
  const auto f = run_to_end(s, 20.0);
  BOOST_TEST(f.ending.code == 5);
  BOOST_TEST(f.output == "from the body");
}

BOOST_AUTO_TEST_CASE(running_and_kill) {
  ChildSpec s;
  s.argv = {"sleep", "300"};  // searched on PATH
  Child c = Child::start(s);
  BOOST_TEST(c.running());
  const Ending e = c.kill();
  BOOST_TEST((e.kind == Ending::Kind::killed_by_signal));
  BOOST_TEST(e.code == SIGKILL);
  BOOST_TEST(!c.running());
  BOOST_TEST(gone(c.pid()));
}

BOOST_AUTO_TEST_CASE(a_crash_before_the_kill_stays_a_crash) {
  Child c = Child::start(shell("kill -ABRT $$"));
  while (c.running()) ::usleep(1000);
  BOOST_TEST(c.kill().code == SIGABRT);
}

BOOST_AUTO_TEST_CASE(destroying_a_running_child_ends_it) {
  pid_t pid;
  {
    ChildSpec s;
    s.argv = {"sleep", "300"};
    Child c = Child::start(s);
    pid = c.pid();
  }
  BOOST_TEST(gone(pid));
}

namespace {

// Starts `script` (which prints the pid of a process it leaves behind), waits for its end and
// returns that pid.
pid_t left_behind_by(const std::string& script) {
  Child c = Child::start(shell(script));
  const Ending e = c.wait(20.0);
  BOOST_TEST(e.ok(), e.describe() + ": " + c.output());
  return static_cast<pid_t>(std::stol("0" + c.output()));
}

bool gone_within(pid_t pid, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!gone(pid) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return gone(pid);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_descendant_in_a_session_of_its_own_is_ended_with_the_child) {
  // setsid leaves the group: only the scope token in its environment finds it.
  const pid_t daemon = left_behind_by("setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!");
  BOOST_TEST_REQUIRE(daemon > 0);
  BOOST_TEST(gone_within(daemon, 5.0), "pid " << daemon << " outlived the child that started it");
  if (!gone(daemon)) ::kill(daemon, SIGKILL);
}

BOOST_AUTO_TEST_CASE(a_double_forked_daemon_that_dropped_its_environment_is_ended_as_an_orphan) {
  // env -i drops the token; the double fork re-parents the daemon to this process (a subreaper),
  // which did not start it.
  const pid_t daemon =
      left_behind_by("(env -i setsid /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $!) ; sleep 0.2");
  BOOST_TEST_REQUIRE(daemon > 0);
  BOOST_TEST(gone_within(daemon, 5.0), "pid " << daemon << " outlived the child that started it");
  if (!gone(daemon)) ::kill(daemon, SIGKILL);
}

BOOST_AUTO_TEST_CASE(a_childs_scope_does_not_reach_another_childs_processes) {
  Child other = Child::start(shell("exec sleep 300"));
  const pid_t daemon = left_behind_by("setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!");
  BOOST_TEST(gone_within(daemon, 5.0));
  BOOST_TEST(other.running(), "ending one child's scope ended another child");
  other.kill();
}

BOOST_AUTO_TEST_CASE(a_child_this_process_forked_itself_is_not_taken_for_an_orphan) {
  // As a sanitizer's symbolizer or an in-process plugin's helper: forked outside Child, in this
  // process's group. Ending a Child's scope leaves it alone.
  const pid_t own = ::fork();
  if (own == 0) {
    ::pause();
    ::_exit(0);
  }
  BOOST_TEST_REQUIRE(own > 0);
  (void)left_behind_by("echo 0");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  BOOST_TEST(!gone(own), "a child forked outside Child was killed");
  ::kill(own, SIGKILL);
  ::waitpid(own, nullptr, 0);
}

// A harness killed outright (kill -9, the OOM killer) runs no clean-up: what it started must die with
// it or be found by the next run.
namespace {

using swa::platform::OwnerState;

// `spec` started from a forked process that then exits without ending it (as a process killed
// outright does) and is reaped: returns the started child's pid. The child comes to this process
// (a subreaper).
pid_t started_by_a_process_that_died(ChildSpec spec) {
  int fds[2];
  BOOST_TEST_REQUIRE(::pipe(fds) == 0);
  const pid_t middle = ::fork();
  if (middle == 0) {
    ::close(fds[0]);
    try {
      Child c = Child::start(std::move(spec));
      const pid_t pid = c.pid();
      (void)::write(fds[1], &pid, sizeof pid);
      ::_exit(0);  // ~Child does not run: the child is left running
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(fds[1]);
  pid_t pid = -1;
  if (::read(fds[0], &pid, sizeof pid) != static_cast<ssize_t>(sizeof pid)) pid = -1;
  ::close(fds[0]);
  ::waitpid(middle, nullptr, 0);
  return pid;
}

// SIGKILL and reap a process of a test that outlived it (it is this process's child, adopted or not).
void end_left_over(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// The environment of this process, plus `entry` (a marker of this test's own processes).
std::vector<std::string> environment_with(const std::string& entry) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  env.push_back(entry);
  return env;
}

// True once `pid`'s environment holds `entry`. Child::start returns at the fork: a scan of /proc before
// the child's exec reads its parent's environment (under load the exec can come a while later).
bool exec_seen_within(pid_t pid, const std::string& entry, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  do {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    const std::string environ_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (environ_text.find(entry + std::string(1, '\0')) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

std::string marker(const char* what) { return "SWA_CHILD_PROCESS_TEST=" + std::string(what) + "-" + std::to_string(::getpid()); }

}  // namespace

BOOST_AUTO_TEST_CASE(a_child_that_dies_with_its_parent_is_killed_when_the_parent_dies) {
  ChildSpec s;
  s.argv = {"sleep", "300"};
  s.die_with_parent = true;
  const pid_t pid = started_by_a_process_that_died(s);
  BOOST_TEST_REQUIRE(pid > 0);
  BOOST_TEST(gone_within(pid, 5.0), "pid " << pid << " outlived the process that started it");
  end_left_over(pid);
}

BOOST_AUTO_TEST_CASE(by_default_a_child_outlives_its_parent) {
  // The plugin workers must not die with the job thread that started them (child_process.hpp).
  ChildSpec s;
  s.argv = {"sleep", "300"};
  const pid_t pid = started_by_a_process_that_died(s);
  BOOST_TEST_REQUIRE(pid > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  BOOST_TEST(!gone(pid));
  end_left_over(pid);
}

BOOST_AUTO_TEST_CASE(an_owner_tag_tells_a_live_owner_from_a_dead_one_and_a_reused_pid) {
  const std::string own = swa::platform::owner_tag();
  BOOST_TEST((swa::platform::owner_state(own) == OwnerState::alive));
  const std::size_t first = own.find('-'), second = own.find('-', first + 1);
  BOOST_TEST_REQUIRE(second != std::string::npos);
  const std::string pid = own.substr(0, first), ns = own.substr(second + 1);
  // This pid, started at another time: a process that took the pid of a dead one.
  BOOST_TEST((swa::platform::owner_state(pid + "-1-" + ns) == OwnerState::dead));
  const pid_t done = ::fork();
  if (done == 0) ::_exit(0);
  ::waitpid(done, nullptr, 0);
  BOOST_TEST((swa::platform::owner_state(std::to_string(done) + "-1-" + ns) == OwnerState::dead));
  BOOST_TEST((swa::platform::owner_state(pid + "-1-" + ns + "1") == OwnerState::unknown));  // another pid namespace
  BOOST_TEST((swa::platform::owner_state(pid) == OwnerState::unknown));                      // a token of the old form
  BOOST_TEST((swa::platform::owner_state("12-x-3") == OwnerState::unknown));
  BOOST_TEST(swa::platform::scope_prefix().rfind(own + "x", 0) == 0);
}

BOOST_AUTO_TEST_CASE(the_scopes_of_a_dead_owner_are_ended_and_a_live_owners_are_not) {
  const std::string mark = marker("orphans");
  ChildSpec s;
  s.argv = {"sleep", "300"};
  s.env = environment_with(mark);
  // Left by a process that died: its token names a dead owner.
  const pid_t orphan = started_by_a_process_that_died(s);
  BOOST_TEST_REQUIRE(orphan > 0);
  // A token naming this process's pid with another start time: its owner died and the pid was reused.
  const std::string own = swa::platform::owner_tag();
  const std::size_t first = own.find('-'), second = own.find('-', first + 1);
  ChildSpec reused = s;
  reused.env->push_back(std::string(swa::platform::kScopeVariable) + "=" + own.substr(0, first) + "-1-" +
                        own.substr(second + 1) + "x0000000000000000.0");
  Child of_reused = Child::start(reused);
  Child live = Child::start(s);  // this process's: alive
  BOOST_TEST(!gone(orphan));
  for (const pid_t pid : {orphan, of_reused.pid(), live.pid()})
    BOOST_TEST_REQUIRE(exec_seen_within(pid, mark, 10.0), "pid " << pid << " did not exec within 10 s");
  const int ended = swa::platform::end_orphaned_scopes(mark);
  // Another harness run on the machine may reap a dead owner's processes first: what counts is that
  // they are gone, and the live one is not.
  BOOST_TEST(ended <= 2);
  BOOST_TEST(gone_within(orphan, 5.0), "pid " << orphan << " of a dead owner's scope was not ended");
  BOOST_TEST(!of_reused.running(), "a process whose token's pid was reused was not ended");
  BOOST_TEST(live.running(), "a live owner's child was ended");
  live.kill();
  end_left_over(orphan);
}

BOOST_AUTO_TEST_CASE(a_lock_file_is_taken_once_says_who_holds_it_and_goes_with_the_lock) {
  using swa::platform::LockFile;
  char dir_template[] = "/tmp/swa_lock_file_test.XXXXXX";
  BOOST_TEST_REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template, path = dir + "/r.h5.lock";
  std::string held_by;
  std::optional<LockFile> first = LockFile::try_lock(path, "swa-harness run a.yaml\n--out r.h5", held_by);
  BOOST_TEST_REQUIRE(first.has_value());
  // Another open of the file, in this process or another, finds it taken and who took it.
  BOOST_TEST(!LockFile::try_lock(path, "second", held_by).has_value());
  BOOST_TEST(held_by.rfind("pid " + std::to_string(::getpid()) + " on ", 0) == 0, held_by);
  BOOST_TEST(held_by.find(" since ") != std::string::npos, held_by);
  BOOST_TEST(held_by.find(": swa-harness run a.yaml --out r.h5") != std::string::npos, held_by);
  const pid_t other = ::fork();
  if (other == 0) {
    std::string seen;
    ::_exit(LockFile::try_lock(path, "child", seen).has_value() ? 1 : 0);
  }
  int status = 0;
  ::waitpid(other, &status, 0);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), "another process took a held lock");
  first.reset();
  BOOST_TEST(::access(path.c_str(), F_OK) != 0, "the lock file outlived its lock");

  // A holder killed outright leaves its file behind, unlocked: the next one takes it over.
  int ready[2];
  BOOST_TEST_REQUIRE(::pipe(ready) == 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    std::string seen;
    auto lock = LockFile::try_lock(path, "killed", seen);
    (void)::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char byte;
  BOOST_TEST_REQUIRE(::read(ready[0], &byte, 1) == 1);
  BOOST_TEST(!LockFile::try_lock(path, "while it lives", held_by).has_value());
  BOOST_TEST(held_by.find("pid " + std::to_string(holder) + " ") == 0, held_by);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  BOOST_TEST(::access(path.c_str(), F_OK) == 0);
  std::optional<LockFile> next = LockFile::try_lock(path, "next", held_by);
  BOOST_TEST_REQUIRE(next.has_value());
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  BOOST_TEST(line.find(": next") != std::string::npos, line);
  next.reset();
  ::close(ready[0]);
  ::close(ready[1]);
  ::rmdir(dir.c_str());
}
