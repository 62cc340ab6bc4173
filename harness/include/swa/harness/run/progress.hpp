// The console's account of a run while it goes: how far, how fast, how long still.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "swa/harness/judge/results.hpp"

namespace swa::harness {

// One update per finished scenario. On a terminal, one line rewritten in place, cut to the terminal's
// width so that it never wraps (a wrapped line leaves debris that \r cannot clear):
//   [12/68] 3 failing  0:42 elapsed  17/min  ETA 3:12  mode=prefill/seqs=...
// Elsewhere (a pipe, a file, CI) one line per scenario with its verdicts, then the time:
//   [12/68] mode=prefill/... cpu=pass baseline=pass  (0:42, ETA 3:12)
// The rate counts scenarios this run computed; those a --resume found done are not work done now.
class ProgressLine {
 public:
  using Clock = std::function<double()>;      // seconds, monotonic
  using Columns = std::function<int()>;       // the terminal's width now (it can be resized)
  ProgressLine(std::size_t total, bool terminal, std::ostream& out, Clock clock = {}, Columns columns = {});

  // rows empty: the scenario was already in the file (--resume).
  void scenario_done(const std::string& scenario_id, const std::vector<ResultRow>& rows);
  void finish();  // ends the terminal's line
  int failing() const { return failing_; }

 private:
  std::string timing() const;  // "0:42 elapsed  17/min  ETA 3:12" (the parts known so far)

  std::size_t total_;
  bool terminal_;
  std::ostream& out_;
  Clock clock_;
  Columns columns_;
  double started_;
  std::size_t finished_ = 0;
  std::size_t computed_ = 0;  // finished by this run, not found done
  int failing_ = 0;
};

// "0:42", "12:05", "1:02:03".
std::string clock_text(double seconds);

}  // namespace swa::harness
