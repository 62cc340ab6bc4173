#include "swa/platform/terminal.hpp"

#include <sys/ioctl.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace swa::platform {

std::optional<int> terminal_columns(int fd) {
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  const char* text = std::getenv("COLUMNS");
  if (text == nullptr) return std::nullopt;
  int columns = 0;
  const char* end = text + std::strlen(text);
  const auto [at, error] = std::from_chars(text, end, columns);
  if (error != std::errc() || at != end || columns < 10 || columns > 10000) return std::nullopt;
  return columns;
}

}  // namespace swa::platform
