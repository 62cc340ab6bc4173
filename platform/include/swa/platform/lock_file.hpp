// An exclusive lock that says who holds it: a sidecar file (RESULTS.h5.lock beside RESULTS.h5) held
// with flock(LOCK_EX | LOCK_NB) for the life of a LockFile, holding one line that names the holder.
// A lock of a process that died is free at once (the kernel drops a flock with its last descriptor);
// the file it leaves behind is taken over by the next holder.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace swa::platform {

class LockFile {
 public:
  // Takes the lock on `path` (creating the file) without waiting and writes into it
  // "pid N on HOST since YYYY-MM-DD HH:MM:SS" and, when `what` is not empty, ": " and `what` (its
  // line breaks made spaces). When another process holds it, returns nothing and sets `held_by` to
  // the line that process wrote ("an unknown process" when it wrote none). Throws std::system_error
  // naming `path` when the file cannot be created or locked (a read-only folder, a file system
  // without flock).
  static std::optional<LockFile> try_lock(const std::filesystem::path& path, const std::string& what,
                                          std::string& held_by);

  LockFile(LockFile&& other) noexcept;
  LockFile& operator=(LockFile&& other) noexcept;
  ~LockFile();  // removes the file while it still holds the lock, then releases it

  const std::filesystem::path& path() const { return path_; }

 private:
  LockFile(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  void release();
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace swa::platform
