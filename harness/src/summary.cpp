#include "swa/harness/summary.hpp"

#include <iomanip>
#include <map>
#include <ostream>
#include <tuple>

namespace swa::harness {

void print_summary(std::ostream& out, const std::vector<ResultRow>& rows, const std::string& sweep_file) {
  std::map<std::tuple<std::string, std::string, std::string>, std::map<std::string, int>> table;
  for (const auto& r : rows) ++table[{r.dut, r.dtype, r.mode}][r.status];
  out << std::left << std::setw(30) << "dut" << std::setw(7) << "dtype" << std::setw(17) << "mode" << std::right
      << std::setw(7) << "pass" << std::setw(7) << "fail" << std::setw(7) << "error" << std::setw(7) << "skip" << "\n";
  for (const auto& [key, counts] : table) {
    const auto& [dut, dtype, mode] = key;
    auto n = [&](const char* s) { return counts.count(s) ? counts.at(s) : 0; };
    out << std::left << std::setw(30) << dut << std::setw(7) << dtype << std::setw(17) << mode << std::right
        << std::setw(7) << n("pass") << std::setw(7) << n("fail") << std::setw(7) << n("error") << std::setw(7)
        << n("skip") << "\n";
  }
  int bad = 0;
  for (const auto& r : rows) {
    if (r.status != "fail" && r.status != "error") continue;
    if (bad++ == 0) out << "\nfailures (each line reruns exactly that case):\n";
    out << "  " << r.status << " " << r.dut << " " << r.scenario_id << "\n    " << r.reason << "\n    swa-harness run "
        << sweep_file << " --filter '" << r.scenario_id << "' --dut " << r.dut << "\n";
  }
  int pass = 0, skip = 0;
  for (const auto& r : rows) {
    pass += r.status == "pass";
    skip += r.status == "skip";
  }
  out << "\n" << pass << " passed, " << bad << " failed, " << skip << " skipped\n";
}

}  // namespace swa::harness
