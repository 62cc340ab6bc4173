#include "swa/harness/run/progress.hpp"

#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "swa/harness/judge/verdict_enum.hpp"

namespace swa::harness {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// `text` cut to `columns` code points (an ID is ASCII, but a sweep name need not be), "..." marking a cut.
std::string fit(const std::string& text, std::size_t columns) {
  std::size_t count = 0;
  for (char c : text) count += !continuation_byte(c);
  if (count <= columns) return text;
  const std::size_t keep = columns > 3 ? columns - 3 : 0;
  std::size_t at = 0;
  for (std::size_t seen = 0; at < text.size(); ++at) {
    if (!continuation_byte(text[at]) && seen++ == keep) break;
  }
  return text.substr(0, at) + std::string("...").substr(0, columns - keep);
}

std::string rate_text(double per_second) {
  char text[32];
  if (per_second >= 1.0)
    std::snprintf(text, sizeof text, "%.3g/s", per_second);
  else
    std::snprintf(text, sizeof text, "%.3g/min", per_second * 60.0);
  return text;
}

}  // namespace

std::string clock_text(double seconds) {
  const long long s = std::isfinite(seconds) && seconds > 0 ? std::llround(seconds) : 0;
  char text[48];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  return text;
}

ProgressLine::ProgressLine(std::size_t total, bool terminal, std::ostream& out, Clock clock, Columns columns)
    : total_(total), terminal_(terminal), out_(out), clock_(clock ? std::move(clock) : Clock(steady_seconds)),
      columns_(std::move(columns)), started_(clock_()) {}

std::string ProgressLine::timing() const {
  const double elapsed = clock_() - started_;
  std::string text = clock_text(elapsed) + " elapsed";
  if (computed_ == 0 || elapsed <= 0) return text;
  const double rate = static_cast<double>(computed_) / elapsed;
  text += "  " + rate_text(rate);
  if (finished_ < total_) text += "  ETA " + clock_text(static_cast<double>(total_ - finished_) / rate);
  return text;
}

void ProgressLine::scenario_done(const std::string& scenario_id, const std::vector<ResultRow>& rows) {
  ++finished_;
  if (!rows.empty()) ++computed_;
  std::string verdicts;
  for (const auto& r : rows) {
    verdicts += " " + r.dut + "=" + std::string(verdict_name(r.status));
    failing_ += is_failure(r.status);
  }
  const std::string count = "[" + std::to_string(finished_) + "/" + std::to_string(total_) + "] ";
  // One write per line: a DUT's printed block (isolated_plugin.cpp), written from a job's thread
  // while the store's committer prints, falls between lines, never inside one.
  std::string text;
  if (terminal_) {
    const int columns = columns_ ? columns_() : 80;
    // One column short of the width: a line that fills the last column wraps on some terminals.
    const std::size_t budget = static_cast<std::size_t>(columns > 10 ? columns - 1 : 9);
    text = "\r\033[K" + fit(count + std::to_string(failing_) + " failing  " + timing() + "  " + scenario_id, budget);
  } else {
    text = count + scenario_id + (rows.empty() ? " (already done)" : verdicts) + "  (" + timing() + ")\n";
  }
  out_ << text << std::flush;
}

void ProgressLine::finish() {
  if (terminal_ && finished_ > 0) out_ << "\n" << std::flush;
}

}  // namespace swa::harness
