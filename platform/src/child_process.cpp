#include "swa/platform/child_process.hpp"

#include "swa/platform/process_scope.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

extern char** environ;

namespace swa::platform {
namespace {

using Clock = std::chrono::steady_clock;

// A file descriptor closed on scope exit unless released.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    const int f = fd;
    fd = -1;
    return f;
  }
};

Ending from_wait_status(int status) {
  Ending e;
  if (WIFSIGNALED(status)) {
    e.kind = Ending::Kind::killed_by_signal;
    e.code = WTERMSIG(status);
  } else {
    e.kind = Ending::Kind::exited;
    e.code = WEXITSTATUS(status);
  }
  return e;
}

// See Child::wait: a child's death by an interrupt signal is reported a second late.
void let_an_interrupt_of_this_process_land(const Ending& ending) {
  if (ending.by_interrupt_signal()) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void become_child(const ChildSpec& spec, char* const* argv, char* const* envp, int dev_null,
                               int capture_write, int* moved_fds, pid_t parent) {
  if (spec.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died between the fork and the prctl: then nothing will send the signal.
    if (::getppid() != parent) ::_exit(127);
  }
  if (spec.own_group) ::setpgid(0, 0);
  // A blocked mask and ignored signals survive exec; handlers do not, but a body runs before any exec.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);  // EINVAL for libc's own: fine
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  ::dup2(dev_null, STDIN_FILENO);
  auto route = [&](Stream to, int fd) {
    if (to == Stream::capture) ::dup2(capture_write, fd);
    if (to == Stream::discard) ::dup2(dev_null, fd);
  };
  route(spec.stderr_to, STDERR_FILENO);
  if (spec.stdout_to == Stream::join_stderr)
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
  else
    route(spec.stdout_to, STDOUT_FILENO);
  // pass_fds become 3, 4, ...: first out of the way (a source may sit where another one goes), then in place.
  const int n = static_cast<int>(spec.pass_fds.size());
  for (int i = 0; i < n; ++i) moved_fds[i] = ::fcntl(spec.pass_fds[i], F_DUPFD, 3 + n);
  for (int i = 0; i < n; ++i) ::dup2(moved_fds[i], 3 + i);  // dup2 clears close-on-exec on the copy
  ::close_range(3 + n, ~0u, 0);

  if (spec.body) ::_exit(spec.body());
  if (envp)
    ::execvpe(argv[0], argv, envp);
  else
    ::execvp(argv[0], argv);
  ::_exit(127);
}

}  // namespace

std::string Ending::describe() const {
  char text[160];
  switch (kind) {
    case Kind::exited:
      std::snprintf(text, sizeof text, "exited with status %d", code);
      break;
    case Kind::killed_by_signal:
      std::snprintf(text, sizeof text, "was killed by signal %d (%s)", code, ::strsignal(code));
      break;
    case Kind::timed_out:
      std::snprintf(text, sizeof text, "timed out after %g s", limit_s);
      break;
  }
  return text;
}

int Ending::shell_status() const {
  switch (kind) {
    case Kind::exited:
      return code;
    case Kind::killed_by_signal:
      return 128 + code;
    case Kind::timed_out:
      break;
  }
  return -1;
}

bool Ending::by_interrupt_signal() const {
  const int status = shell_status();
  return status == 128 + SIGINT || status == 128 + SIGTERM || status == 128 + SIGHUP || status == 128 + SIGQUIT;
}

Child Child::start(ChildSpec spec) {
  const std::string what = spec.body ? std::string("a forked reader") : spec.argv.empty() ? "" : spec.argv[0];
  if (!spec.body && spec.argv.empty()) throw std::invalid_argument("Child::start: neither argv nor a body");
  // Everything the child needs is built before the fork: after it, only async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& a : spec.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  // A program's descendants carry its scope token, so that those leaving its group are found too.
  std::string token;
  if (!spec.body) {
    std::vector<std::string> env;
    if (spec.env) {
      env = std::move(*spec.env);
    } else {
      for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
    }
    const std::string name = std::string(kScopeVariable) + "=";
    std::string inherited;
    for (auto it = env.begin(); it != env.end();) {
      if (it->compare(0, name.size(), name) == 0) {
        inherited = it->substr(name.size());
        it = env.erase(it);
      } else {
        ++it;
      }
    }
    if (!spec.outside_scope) {
      token = new_scope_token();
      env.push_back(scope_entry(inherited, token));
    }
    spec.env = std::move(env);
  }
  std::vector<char*> envp;
  if (spec.env) {
    for (auto& e : *spec.env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  std::vector<int> moved_fds(spec.pass_fds.size());

  Fd dev_null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (dev_null.fd < 0) throw std::system_error(errno, std::generic_category(), "cannot open /dev/null to start " + what);
  const bool captures = spec.stdout_to == Stream::capture || spec.stderr_to == Stream::capture;
  Fd capture_read, capture_write;
  if (captures) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "cannot create a pipe to start " + what);
    capture_read.fd = fds[0];
    capture_write.fd = fds[1];
  }

  // Held across the fork: a scan for orphans must not take this child, not yet recorded, for one.
  StartedChildren::lock();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0)
    become_child(spec, argv.data(), spec.env ? envp.data() : nullptr, dev_null.fd, capture_write.fd,
                 moved_fds.data(), parent);
  if (pid > 0) StartedChildren::add(pid);
  StartedChildren::unlock();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "cannot fork to start " + what);

  // As the child does: no window in which a kill of the group misses it.
  if (spec.own_group) ::setpgid(pid, pid);
  Child c;
  c.pid_ = pid;
  c.own_group_ = spec.own_group;
  c.scope_ = std::move(token);
  c.capture_ = capture_read.release();
  c.capture_limit_ = spec.capture_limit;
  // Where the kernel has it (Linux 5.3), poll wakes at the child's end; elsewhere the wait polls.
  c.pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (c.capture_ >= 0) ::fcntl(c.capture_, F_SETFL, ::fcntl(c.capture_, F_GETFL) | O_NONBLOCK);
  return c;
}

Child::Child(Child&& other) noexcept { *this = std::move(other); }

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    own_group_ = other.own_group_;
    scope_ = std::move(other.scope_);
    pidfd_ = std::exchange(other.pidfd_, -1);
    capture_ = std::exchange(other.capture_, -1);
    capture_limit_ = other.capture_limit_;
    dropped_ = other.dropped_;
    output_ = std::move(other.output_);
    ended_ = other.ended_;
  }
  return *this;
}

Child::~Child() { release(); }

void Child::release() {
  if (pid_ > 0 && !ended_) kill();
  if (pidfd_ >= 0) ::close(pidfd_);
  if (capture_ >= 0) ::close(capture_);
  pidfd_ = capture_ = -1;
  pid_ = -1;
}

// Reads what the pipe holds now, waiting at most timeout_ms (-1: until something happens) for the
// pipe or the child's end. The buffer keeps twice the limit between trims: a chatty child costs a
// copy of the kept bytes per limit's worth read, not per read.
void Child::read_available(int timeout_ms) {
  pollfd fds[2];
  nfds_t n = 0;
  if (capture_ >= 0) fds[n++] = {capture_, POLLIN, 0};
  if (pidfd_ >= 0) fds[n++] = {pidfd_, POLLIN, 0};
  // Without a pidfd nothing wakes the poll at the child's end: look again every 5 ms.
  if (pidfd_ < 0 && (timeout_ms < 0 || timeout_ms > 5)) timeout_ms = 5;
  if (::poll(fds, n, timeout_ms) <= 0 || capture_ < 0 || fds[0].revents == 0) return;
  char buffer[65536];
  const ssize_t got = ::read(capture_, buffer, sizeof buffer);
  if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
    ::close(capture_);
    capture_ = -1;
    return;
  }
  if (got < 0) return;
  output_.append(buffer, static_cast<std::size_t>(got));
  if (output_.size() > 2 * capture_limit_) {
    dropped_ += output_.size() - capture_limit_;
    output_.erase(0, output_.size() - capture_limit_);
  }
}

// The leader has ended, not yet reaped (its pid stays taken, so its group's id cannot be reused):
// read what it left in the pipe, end the rest of its group, reap it.
void Child::finish(Ending ending) {
  ended_ = ending;
  read_output_now();  // what is in the pipe now, but no more: a grandchild may keep writing
  if (capture_ >= 0) ::close(capture_);
  capture_ = -1;
  if (pidfd_ >= 0) ::close(pidfd_);
  pidfd_ = -1;
  if (output_.size() > capture_limit_) {
    dropped_ += output_.size() - capture_limit_;
    output_.erase(0, output_.size() - capture_limit_);
  }
}

Ending Child::wait(std::optional<double> seconds) {
  if (ended_) return *ended_;
  const auto start = Clock::now();
  for (;;) {
    siginfo_t info{};
    // WNOWAIT: seen but not reaped, so that the group is ended while the leader's pid is still taken.
    const int seen = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (seen == 0 && info.si_pid == pid_) {
      if (own_group_) ::kill(-pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      finish(from_wait_status(status));
      end_descendants();
      let_an_interrupt_of_this_process_land(*ended_);
      return *ended_;
    }
    if (seen < 0 && errno != EINTR) {  // ECHILD: reaped elsewhere, how it ended is unknown
      finish(Ending{Ending::Kind::exited, -1, 0.0});
      end_descendants();
      return *ended_;
    }
    int timeout_ms = -1;
    if (seconds) {
      const double left = *seconds - std::chrono::duration<double>(Clock::now() - start).count();
      if (left <= 0) {
        kill();
        ended_ = Ending{Ending::Kind::timed_out, 0, *seconds};
        return *ended_;
      }
      timeout_ms = static_cast<int>(std::ceil(std::min(left, 3600.0) * 1000));
    }
    read_available(timeout_ms);
  }
}

bool Child::running() {
  if (ended_ || pid_ <= 0) return false;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0)
    return true;
  wait(0.0);  // it has ended: reap it and end its group
  return false;
}

Ending Child::kill() {
  if (ended_) return *ended_;
  if (own_group_) ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status = 0;
  pid_t got;
  while ((got = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  finish(got == pid_ ? from_wait_status(status) : Ending{Ending::Kind::exited, -1, 0.0});
  end_descendants();
  let_an_interrupt_of_this_process_land(*ended_);  // it may have died on its own before the SIGKILL
  return *ended_;
}

// After the leader is reaped: the rest of its group, then whatever carries its scope token or was
// left to this process as a subreaper.
void Child::end_descendants() {
  if (own_group_) end_process_group(pid_);
  StartedChildren::remove(pid_);
  if (!scope_.empty()) end_scope(scope_);
}

void Child::read_output_now() {
  // A few rounds at most: a child writing without a pause must not keep this process here.
  for (int round = 0; round < 64 && capture_ >= 0; ++round) {
    pollfd p{capture_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    read_available(0);
  }
}

void Child::clear_output() {
  output_.clear();
  dropped_ = 0;
}

std::string Child::output_tail(std::size_t chars) const {
  if (output_.size() <= chars) return dropped_ ? "..." + output_ : output_;
  return "..." + output_.substr(output_.size() - chars);
}

Finished run_to_end(ChildSpec spec, std::optional<double> seconds) {
  Child c = Child::start(std::move(spec));
  Finished f;
  f.ending = c.wait(seconds);
  f.output = c.output();
  return f;
}

void end_process_group(pid_t pgid) {
  if (::kill(-pgid, SIGKILL) != 0) return;  // ESRCH: nobody of the group is left
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < deadline) {
    const pid_t reaped = ::waitpid(-pgid, nullptr, WNOHANG);
    if (reaped < 0) return;  // ECHILD: none of the group is (or is left as) this process's child
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace swa::platform
