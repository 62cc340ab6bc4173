#include "swa/harness/base/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "swa/harness/base/interrupt.hpp"

namespace swa::harness {
namespace {

std::string cannot(const std::filesystem::path& path, const std::string& what) {
  return "cannot write " + path.string() + ": " + what + ": " + std::strerror(errno);
}

// O_DIRECT writes need the buffer, the length and the offset in whole blocks of the device; 4096
// covers the usual 512- and 4096-byte ones (a larger one fails with EINVAL and is written buffered).
constexpr std::size_t kDirectBlock = 4096;

// Large page-aligned images (AtomicFile's) go to the disk straight from memory. On a virtual
// machine that hands freed memory back to its host, every page-cache page of a fresh 300 MB file
// is first-touched memory: a buffered write of it measured 0.9-1.1 s against 0.17-0.24 s direct.
bool bypasses_page_cache(std::string_view bytes) {
  return bytes.size() >= (std::size_t{16} << 20) && reinterpret_cast<std::uintptr_t>(bytes.data()) % kDirectBlock == 0;
}

// Turns O_DIRECT off on fd; false if it was off already.
bool buffered(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || !(flags & O_DIRECT)) return false;
  return ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0;
}

}  // namespace

std::filesystem::path temporary_for(const std::filesystem::path& path) {
  std::filesystem::path temp = path;
  temp += ".tmp." + std::to_string(::getpid());
  return temp;
}

int remove_orphaned_temporaries(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const std::string prefix = path.filename().string() + ".tmp.";
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !entry.is_regular_file(ec)) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    if (std::filesystem::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, bool durable) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const std::filesystem::path temp = temporary_for(path);
  const TrackedPath tracked(temp);  // an interrupt meanwhile removes it
  const bool direct = durable && bypasses_page_cache(bytes);
  int fd = -1;
  if (direct) fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0666);
  if (fd < 0) fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);  // no O_DIRECT here
  if (fd < 0) throw std::runtime_error(cannot(path, "create " + temp.string()));
  std::string failure;
  const std::size_t whole_blocks = bytes.size() / kDirectBlock * kDirectBlock;
  for (std::size_t done = 0; done < bytes.size() && failure.empty();) {
    // The tail past the last whole block, or anything the file system refuses direct, goes buffered.
    if (done == whole_blocks) buffered(fd);
    const std::size_t want = (done < whole_blocks ? whole_blocks : bytes.size()) - done;
    const ssize_t n = ::write(fd, bytes.data() + done, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && buffered(fd)) continue;
    if (n <= 0) failure = cannot(path, "write " + std::to_string(bytes.size()) + " bytes to " + temp.string());
    else done += static_cast<std::size_t>(n);
  }
  if (failure.empty() && durable && ::fsync(fd) != 0) failure = cannot(path, "fsync " + temp.string());
  if (::close(fd) != 0 && failure.empty()) failure = cannot(path, "close " + temp.string());
  if (failure.empty() && ::rename(temp.c_str(), path.c_str()) != 0) failure = cannot(path, "rename " + temp.string());
  if (!failure.empty()) {
    ::unlink(temp.c_str());
    throw std::runtime_error(failure);
  }
  // The rename survives a power loss only once the folder is on disk too.
  if (durable)
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
}

std::string read_small_file(const std::filesystem::path& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO nobody writes returns at once, and the check below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path.string() + ": cannot be read (" + std::strerror(errno) + ")");
  struct stat st {};
  std::string bytes;
  const char* problem = nullptr;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    problem = "not a regular file (a FIFO, a device, a folder): refused unread";
  } else if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) {
    problem = "larger than such a file can be: refused unread";
  } else {
    char buffer[4096];
    for (;;) {
      const ssize_t got = ::read(fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) problem = "cannot be read";
      if (got <= 0) break;
      bytes.append(buffer, static_cast<std::size_t>(got));
      if (bytes.size() > max_bytes) {
        problem = "larger than such a file can be: refused";
        break;
      }
    }
  }
  ::close(fd);
  if (problem) throw std::runtime_error(path.string() + ": " + problem);
  return bytes;
}

}  // namespace swa::harness
