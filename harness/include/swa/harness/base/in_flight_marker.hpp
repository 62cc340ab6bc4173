#pragma once
// RESULTS.h5.inflight: the IDs of the scenarios running or not yet committed, one per line, so a DUT
// that kills the process leaves them beside the results. Rewritten twice per scenario, so in place
// through one open descriptor rather than a temporary renamed over it (a rename costs a directory
// update; it was a tenth of a warm-cache run's system time). The new text is padded with newlines to
// the old length before the file is cut to size, so a process killed in between leaves the new IDs
// and blank lines, never a fragment of an old ID. A hint only: write errors are ignored.
#include <filesystem>
#include <string_view>

namespace swa::harness {

class InFlightMarker {
 public:
  explicit InFlightMarker(std::filesystem::path path) : path_(std::move(path)) {}
  ~InFlightMarker();  // removes the file when it lists nothing
  InFlightMarker(const InFlightMarker&) = delete;
  InFlightMarker& operator=(const InFlightMarker&) = delete;

  // Replaces the listed IDs ("" lists none: the file is emptied, then removed at the end).
  void write(std::string_view lines);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::size_t length_ = 0;
};

}  // namespace swa::harness
