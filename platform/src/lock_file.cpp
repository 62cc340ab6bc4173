#include "swa/platform/lock_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <system_error>
#include <thread>
#include <utility>

namespace swa::platform {
namespace {

std::string holder_line(const std::string& what) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  char since[32] = "?";
  if (::localtime_r(&now, &local)) std::strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", &local);
  std::string line = "pid " + std::to_string(::getpid()) + " on " + host + " since " + since;
  if (!what.empty()) line += ": " + what;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  return line + "\n";
}

// What the holder wrote: it writes just after it locks, so an empty file is looked at again briefly.
std::string read_holder(int fd) {
  std::string text;
  for (int attempt = 0; attempt < 20; ++attempt) {
    char buffer[4096];
    const ssize_t got = ::pread(fd, buffer, sizeof buffer, 0);
    if (got > 0) {
      text.assign(buffer, static_cast<std::size_t>(got));
      const std::size_t end = text.find('\n');
      if (end != std::string::npos) return text.substr(0, end);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return text.empty() ? "an unknown process" : text;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

}  // namespace

std::optional<LockFile> LockFile::try_lock(const std::filesystem::path& path, const std::string& what,
                                           std::string& held_by) {
  // The file a holder removes may be the one this process has just opened: after the flock, the path
  // must still name the file locked, or the lock is on a file nobody else will look at.
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot create the lock file " + path.string());
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (error == EWOULDBLOCK) {
        held_by = read_holder(fd);
        ::close(fd);
        return std::nullopt;
      }
      ::close(fd);
      throw std::system_error(error, std::generic_category(), "cannot lock " + path.string());
    }
    struct stat locked {}, named {};
    if (::fstat(fd, &locked) == 0 && ::stat(path.c_str(), &named) == 0 && same_file(locked, named)) {
      const std::string line = holder_line(what);
      // A hint for whoever finds it taken: a full disk that refuses the line leaves the lock whole.
      if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, line.data(), line.size(), 0) < 0) {
      }
      return LockFile(path, fd);
    }
    ::close(fd);
    if (attempt == 1000)
      throw std::system_error(EAGAIN, std::generic_category(), "cannot lock " + path.string() + ": it keeps being replaced");
  }
}

LockFile::LockFile(LockFile&& other) noexcept { *this = std::move(other); }

LockFile& LockFile::operator=(LockFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

LockFile::~LockFile() { release(); }

void LockFile::release() {
  if (fd_ < 0) return;
  // Removed while still held, and only when the path still names this file: whoever opens the path
  // from now on makes a new file, and whoever opened this one finds it gone once it locks it.
  struct stat locked {}, named {};
  if (::fstat(fd_, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 && same_file(locked, named))
    ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

}  // namespace swa::platform
