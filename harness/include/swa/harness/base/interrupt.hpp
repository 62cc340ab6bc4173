#pragma once
// SIGINT, SIGTERM, SIGHUP and SIGQUIT during a run: a watcher thread kills the process groups DUTs
// started, removes the temporary files and folders in flight, prints how to resume, and exits 128 +
// the signal (130 for SIGINT, 143 SIGTERM, 129 SIGHUP, 131 SIGQUIT). Finished scenarios are
// committed to the results file first (set_interrupt_flush).
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace swa::harness {

// Blocks those signals in this thread (and so in every thread started after it) and starts the
// watcher. Call first thing in a command, before any other thread exists. `resume_hint` is printed.
// Also makes the harness the subreaper of what DUT commands leave behind.
void install_interrupt_handler(std::string resume_hint);

// What an interrupt commits before it exits (the results store's flush); it returns what to say
// when that failed, empty when it did not. An empty function (the default) commits nothing.
void set_interrupt_flush(std::function<std::string()> flush);

// What an interrupt must clean up while it exists (registered only while a handler is installed).
class TrackedPath {
 public:
  explicit TrackedPath(std::filesystem::path p);
  ~TrackedPath();
  TrackedPath(const TrackedPath&) = delete;
  TrackedPath& operator=(const TrackedPath&) = delete;

 private:
  std::filesystem::path path_;
};
// A folder of its own under the temporary directory (TMPDIR/NAME-PID-N), created at once and removed
// with everything in it when it goes out of scope or on an interrupt.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& name);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::optional<TrackedPath> tracked_;
};

class TrackedProcessGroup {
 public:
  explicit TrackedProcessGroup(pid_t pgid);
  ~TrackedProcessGroup();
  TrackedProcessGroup(const TrackedProcessGroup&) = delete;
  TrackedProcessGroup& operator=(const TrackedProcessGroup&) = delete;

 private:
  pid_t pgid_;
};

}  // namespace swa::harness
