#include "swa/harness/base/in_flight_marker.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace swa::harness {

InFlightMarker::~InFlightMarker() {
  if (fd_ < 0) return;
  ::close(fd_);
  if (length_ == 0) {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
}

void InFlightMarker::write(std::string_view lines) {
  if (fd_ < 0) {
    if (lines.empty()) return;  // nothing listed and no file: nothing to do
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    length_ = 0;
  }
  std::string text(lines);
  if (text.size() < length_) text.append(length_ - text.size(), '\n');
  if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) return;
  if (::ftruncate(fd_, static_cast<off_t>(lines.size())) != 0) return;
  length_ = lines.size();
}

}  // namespace swa::harness
