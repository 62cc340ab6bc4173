// ProgressLine: the console's line while a run goes (elapsed, rate, ETA), never wider than the terminal.
#define BOOST_TEST_MODULE progress
#include <boost/test/unit_test.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "swa/harness/run/progress.hpp"

using namespace swa::harness;

namespace {

ResultRow row(const std::string& dut, Verdict status) {
  ResultRow r;
  r.dut = dut;
  r.status = status;
  return r;
}

// The text after the last "\r\033[K": what the terminal shows now.
std::string shown(const std::string& out) {
  const auto at = out.rfind("\r\033[K");
  return at == std::string::npos ? out : out.substr(at + 4);
}

const std::string kId = "mode=prefill/seqs=450-131/hq=8/hkv=2/d=64/w=385/mask=none/fp16/in=normal/seed=1";

}  // namespace

BOOST_AUTO_TEST_CASE(clock_text_reads_as_minutes_or_hours) {
  BOOST_TEST(clock_text(0) == "0:00");
  BOOST_TEST(clock_text(42.4) == "0:42");
  BOOST_TEST(clock_text(725) == "12:05");
  BOOST_TEST(clock_text(3723) == "1:02:03");
  BOOST_TEST(clock_text(-1) == "0:00");
}

BOOST_AUTO_TEST_CASE(the_terminal_line_gives_elapsed_rate_and_eta_and_fits_the_width) {
  double now = 100;
  int columns = 200;
  std::ostringstream out;
  ProgressLine line(10, true, out, [&] { return now; }, [&] { return columns; });
  now += 30;  // 2 scenarios in 30 s: 4/min, 8 left: ETA 2:00
  line.scenario_done(kId, {row("cpu", Verdict::pass)});
  line.scenario_done(kId, {row("cpu", Verdict::fail)});
  BOOST_TEST(shown(out.str()) == "[2/10] 1 failing  0:30 elapsed  4/min  ETA 2:00  " + kId);
  for (columns = 12; columns <= 160; ++columns) {
    line.scenario_done(kId, {row("cpu", Verdict::pass)});
    const std::string now_shown = shown(out.str());
    BOOST_TEST_CONTEXT("columns " << columns << ": '" << now_shown << "'") {
      BOOST_TEST(now_shown.size() <= static_cast<std::size_t>(columns - 1));
      BOOST_TEST(now_shown.find('\n') == std::string::npos);
    }
  }
  line.finish();
  BOOST_TEST(out.str().back() == '\n');
}

BOOST_AUTO_TEST_CASE(a_narrow_terminal_cuts_the_id_first) {
  double now = 0;
  std::ostringstream out;
  ProgressLine line(3, true, out, [&] { return now; }, [] { return 60; });
  now = 6;
  line.scenario_done(kId, {row("cpu", Verdict::pass)});
  const std::string s = shown(out.str());
  BOOST_TEST(s.rfind("[1/3] 0 failing  0:06 elapsed  10/min  ETA 0:12  mode=", 0) == 0);
  BOOST_TEST(s.size() == 59u);
  BOOST_TEST(s.substr(s.size() - 3) == "...");
}

BOOST_AUTO_TEST_CASE(resumed_scenarios_are_not_counted_in_the_rate) {
  double now = 0;
  std::ostringstream out;
  ProgressLine line(4, false, out, [&] { return now; });
  line.scenario_done("a", {});  // already in the file
  line.scenario_done("b", {});
  now = 60;
  line.scenario_done("c", {row("cpu", Verdict::pass), row("baseline", Verdict::error)});
  const std::string text = out.str();
  BOOST_TEST(text.find("[1/4] a (already done)  (0:00 elapsed)\n") != std::string::npos);
  // 1 computed in 60 s (not 3): 1/min, 1 left: ETA 1:00.
  BOOST_TEST(text.find("[3/4] c cpu=pass baseline=error  (1:00 elapsed  1/min  ETA 1:00)\n") != std::string::npos);
  BOOST_TEST(line.failing() == 1);
  line.finish();  // not a terminal: no extra line
  BOOST_TEST(out.str() == text);
}
