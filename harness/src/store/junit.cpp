#include "swa/harness/store/junit.hpp"

#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/base/text.hpp"

#include <fstream>
#include <sstream>

namespace swa::harness {
namespace {

// XML 1.0 whatever the text: clean_text leaves valid UTF-8 without the control characters XML forbids.
std::string xml_escape(const std::string& raw) {
  const std::string s = clean_text(raw, std::string::npos);
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

void write_junit(const std::filesystem::path& path, const std::string& suite, const std::vector<ResultRow>& rows) {
  int failures = 0, errors = 0, skipped = 0;
  double seconds = 0;
  for (const auto& r : rows) {
    failures += r.status == Verdict::fail;
    errors += r.status == Verdict::error;
    skipped += r.status == Verdict::skip;
    seconds += r.run_ms / 1000;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"" << xml_escape(suite)
    << "\" tests=\"" << rows.size() << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\""
    << skipped << "\" time=\"" << seconds << "\">\n";
  for (const auto& r : rows) {
    x << "  <testcase classname=\"" << xml_escape(r.dut) << "\" name=\"" << xml_escape(r.scenario_id) << "\" time=\""
      << r.run_ms / 1000 << "\">\n    <properties><property name=\"dut_label\" value=\"" << xml_escape(r.dut_label) << "\"/>"
      << (r.status == Verdict::warn ? "<property name=\"verdict\" value=\"warn\"/>" : "") << "</properties>";
    std::ostringstream metrics;
    metrics << "max_abs=" << r.max_abs << " threshold=" << r.threshold << " (rtol_factor=" << r.rtol_factor
            << " x baseline_max_abs=" << r.baseline_max_abs << " + atol_floor=" << r.atol_floor
            << ") rel_l2=" << r.rel_l2 << " (" << r.l2_ratio << "x the baseline's in phase " << r.worst_phase
            << "; profile " << r.profile << ")" << " max_ulp=" << r.max_ulp << " cosine=" << r.cosine
            << " nan=" << r.nan_count << " inf=" << r.inf_count << " worst: seq " << r.worst_seq << " token "
            << r.worst_token << " head " << r.worst_head << " dim " << r.worst_dim;
    if (r.status == Verdict::fail)
      x << "\n    <failure message=\"" << xml_escape(r.reason) << "\">" << xml_escape(metrics.str()) << "</failure>\n  ";
    else if (r.status == Verdict::error)
      x << "\n    <error message=\"" << xml_escape(r.reason) << "\"/>\n  ";
    else if (r.status == Verdict::skip)
      x << "\n    <skipped message=\"" << xml_escape(r.reason) << "\"/>\n  ";
    else if (r.status == Verdict::warn)  // JUnit has no warning: a passing case that says so where CI shows it
      x << "\n    <system-out>WARNING: "
        << xml_escape(r.reason) << "\n" << xml_escape(metrics.str()) << "</system-out>\n  ";
    x << (r.status == Verdict::pass ? "\n  " : "") << "</testcase>\n";
  }
  x << "</testsuite>\n</testsuites>\n";
  remove_orphaned_temporaries(path);
  write_file_atomically(path, x.str());
}

}  // namespace swa::harness
