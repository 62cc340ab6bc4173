#include "swa/platform/process_memory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace swa::platform {

std::optional<std::int64_t> resident_anonymous_bytes(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char text[4096];
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return std::nullopt;
  text[got] = '\0';
  const char* line = std::strstr(text, "\nRssAnon:");
  long long kib = 0;
  if (!line || std::sscanf(line + 9, " %lld", &kib) != 1) return std::nullopt;
  return static_cast<std::int64_t>(kib) * 1024;
}

std::int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;
}

}  // namespace swa::platform
