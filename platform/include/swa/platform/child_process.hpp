// One way to start a child process and end it: spawn (argv without a shell, or a function in a forked
// child), capture its output (bounded), its own process group, a bounded wait, a group kill.
// Every fork of the project goes through here (the exec DUT, the plugin workers, sbatch, the forked
// reads of untrusted files), so what a child inherits is decided once.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace swa::platform {

// How a child process ended.
struct Ending {
  enum class Kind { exited, killed_by_signal, timed_out };
  Kind kind = Kind::exited;
  int code = 0;          // the exit status (exited) or the signal (killed_by_signal)
  double limit_s = 0.0;  // the bound it went past (timed_out)

  bool ok() const { return kind == Kind::exited && code == 0; }
  // "exited with status 3", "was killed by signal 11 (Segmentation fault)", "timed out after 2 s"
  std::string describe() const;
  // A shell's way of saying it in one number: the status, 128 + the signal, or -1 for a time-out.
  int shell_status() const;
  // Killed by SIGINT, SIGTERM, SIGHUP or SIGQUIT, or exited with 128 + one of them.
  bool by_interrupt_signal() const;
};

// Where a child's stdout or stderr goes. Both captured streams share one pipe and one buffer.
enum class Stream { inherit, capture, discard, join_stderr /* stdout only: wherever stderr goes */ };

struct ChildSpec {
  // What runs: argv (argv[0] searched on PATH when it has no '/'; no shell), or `body` in the forked
  // child, whose value is the exit status. A body runs after fork in a process that may have had
  // other threads: keep it to code that takes no lock another thread could have held.
  std::vector<std::string> argv;
  std::function<int()> body;
  std::optional<std::vector<std::string>> env;  // "NAME=value" entries; absent: the parent's environment
  Stream stdout_to = Stream::capture;
  Stream stderr_to = Stream::capture;
  std::size_t capture_limit = 64 * 1024;  // the last this many bytes are kept; the rest is counted
  std::vector<int> pass_fds;              // the parent's fds that become 3, 4, ... in the child; no other fd stays open
  bool own_group = true;                  // the child leads a new process group, which the kill ends as a whole
  // SIGKILL to the child when this process dies first, killed outright (kill -9, the OOM killer) with
  // no chance to end it (prctl PR_SET_PDEATHSIG). Off by default: the kernel sends it when the
  // *thread* that forked the child ends, not the process, so a child that outlives the call that
  // started it and is used from other threads (a pooled plugin or python: worker, started by
  // whichever job thread needed it first) would die when that thread does. Those workers end anyway
  // when this process dies: they read end-of-file on their socket. For a child waited on by the
  // thread that started it (the exec DUT's command).
  bool die_with_parent = false;
  // The program hands its work to something outside this process tree (sbatch: the jobs are the
  // scheduler's, started by slurmd, and sbatch passes its environment into them). It gets no scope
  // token and loses the inherited ones: else the jobs would carry a token of this process, and once
  // it has ended, a harness's sweep of dead owners' scopes (end_orphaned_scopes) would kill them.
  bool outside_scope = false;
};

// A started child. Before the child runs anything of its own, every signal is unblocked and set to
// its default action (a parent's sigwait thread or ignored SIGTERM must not survive into it), stdin
// is /dev/null, and only 0, 1, 2 and pass_fds are open. Destroying a running Child kills it.
class Child {
 public:
  // Throws std::system_error naming argv[0] (or "a forked reader") when the child cannot be started;
  // an exec that fails in the child ends it with status 127.
  static Child start(ChildSpec spec);

  Child(Child&& other) noexcept;  // a Child moves; it is not copied (the moves delete the copies)
  Child& operator=(Child&& other) noexcept;
  ~Child();

  pid_t pid() const { return pid_; }
  // Waits for the end, reading captured output meanwhile. With a bound, a child still running after
  // `seconds` is killed (with its group) and the ending says timed_out. After the leader ends, what
  // is left of its group is killed too.
  //
  // A child that died of SIGINT, SIGTERM, SIGHUP or SIGQUIT (or a shell's 128 + one of them) is
  // reported a second late. Such a signal usually went to the whole job, this process too (Slurm's
  // requeue and scancel signal every process of a job; a terminal's Ctrl-C its foreground group);
  // the second lets this process's own interrupt handler end the run first, instead of the child's
  // death being recorded as a failure of the child.
  Ending wait(std::optional<double> seconds = std::nullopt);
  // Without waiting: whether the child still runs (an ended child is reaped, its ending kept).
  bool running();
  // SIGKILL to the group and the child, then reaps it. A child that had ended on its own keeps its
  // own ending (a crash stays a crash; one by an interrupt signal comes a second late, as in wait).
  Ending kill();

  const std::string& output() const { return output_; }       // the captured bytes (the last capture_limit)
  std::size_t output_dropped() const { return dropped_; }      // bytes cut from the front
  // The last `chars` bytes of the output, with "..." in front when anything was cut.
  std::string output_tail(std::size_t chars) const;

  // For a child that lives on while this process waits on something else (a plugin worker between
  // its replies): the captured pipe to poll (-1 when nothing is captured or the pipe has closed), a
  // read of what is in it now, without waiting, so that the child never blocks on a full pipe, and
  // forgetting what was read so far (a reused worker's output then belongs to its current call).
  int output_fd() const { return capture_; }
  void read_output_now();
  void clear_output();

 private:
  Child() = default;
  void read_available(int timeout_ms);
  void finish(Ending ending);
  void release();
  void end_descendants();

  pid_t pid_ = -1;
  bool own_group_ = false;
  std::string scope_;  // the SWA_PROCESS_SCOPE token its descendants carry (none for a body)
  int pidfd_ = -1;    // polled for the child's end where the kernel has pidfd_open
  int capture_ = -1;  // the read end of the captured output
  std::size_t capture_limit_ = 0, dropped_ = 0;
  std::string output_;
  std::optional<Ending> ended_;
};

// Starts `spec`, waits at most `seconds` (none: unbounded), and returns how it ended and what it said.
struct Finished {
  Ending ending;
  std::string output;
};
Finished run_to_end(ChildSpec spec, std::optional<double> seconds = std::nullopt);

// SIGKILL to every process of group `pgid`, reaping those that are this process's children (its own,
// or re-parented to it as a subreaper). Bounded at two seconds: a process in uninterruptible sleep
// cannot be hurried.
void end_process_group(pid_t pgid);

}  // namespace swa::platform
