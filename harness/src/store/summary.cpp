#include "swa/harness/store/summary.hpp"

#include <iomanip>
#include <map>
#include <ostream>
#include <tuple>

#include "swa/harness/base/text.hpp"
#include "swa/harness/judge/verdict.hpp"

namespace swa::harness {

void print_summary(std::ostream& out, const std::vector<ResultRow>& rows, const std::string& sweep_file,
                   const std::map<std::string, std::string>& labels) {
  auto label = [&](const std::string& dut) {
    const auto it = labels.find(dut);
    return it == labels.end() ? dut : it->second;
  };
  std::map<std::tuple<std::string, std::string, std::string>, std::map<Verdict, int>> table;
  for (const auto& r : rows) ++table[{label(r.dut), r.dtype, r.mode}][r.status];
  constexpr Verdict kColumns[] = {Verdict::pass, Verdict::warn, Verdict::fail, Verdict::error, Verdict::skip};
  out << std::left << std::setw(30) << "dut" << std::setw(7) << "dtype" << std::setw(17) << "mode" << std::right;
  for (Verdict v : kColumns) out << std::setw(7) << verdict_name(v);
  out << "\n";
  for (const auto& [key, counts] : table) {
    const auto& [dut, dtype, mode] = key;
    out << std::left << std::setw(29) << dut << " " << std::setw(7) << dtype << std::setw(17) << mode << std::right;
    for (Verdict v : kColumns) {
      const auto it = counts.find(v);
      out << std::setw(7) << (it == counts.end() ? 0 : it->second);
    }
    out << "\n";
  }
  auto list = [&](const char* title, auto keep) {
    int n = 0;
    for (const auto& r : rows) {
      if (!keep(r)) continue;
      if (n++ == 0) out << "\n" << title << " (each line reruns exactly that case):\n";
      // The rerun line is pasted into a shell: every word quoted (an exec: DUT's command has spaces).
      out << "  " << verdict_name(r.status) << " " << r.dut << " " << r.scenario_id << "\n    " << r.reason
          << "\n    swa-harness run " << shell_quote(sweep_file) << " --filter " << shell_quote_always(r.scenario_id)
          << " --dut " << shell_quote(r.dut) << "\n";
    }
    return n;
  };
  const int warned = list("warnings: passed, with precision below a same-precision kernel's",
                          [](const ResultRow& r) { return r.status == Verdict::warn; });
  const int bad = list("failures", [](const ResultRow& r) { return is_failure(r.status); });
  int pass = 0, skip = 0;
  for (const auto& r : rows) {
    pass += r.status == Verdict::pass;
    skip += r.status == Verdict::skip;
  }
  // warnings count as passed in the closing line (they do not fail the run) and are named beside it.
  out << "\n" << pass + warned << " passed, " << bad << " failed, " << skip << " skipped";
  if (warned > 0) out << " (" << warned << " of the passed with a precision warning)";
  out << "\n";
}

}  // namespace swa::harness
