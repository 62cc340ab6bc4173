#include "swa/harness/store/summary.hpp"

#include <filesystem>
#include <iomanip>
#include <map>
#include <ostream>
#include <tuple>

#include "swa/harness/base/text.hpp"
#include "swa/harness/judge/verdict.hpp"

namespace swa::harness {
namespace {

// What a failing row shows, from its columns: the part of a failure's signature that the DUT, mode and
// dtype do not give. One bug of a kernel is one group; a kernel with two (a NaN and a wrong cache) two.
enum class Symptom { ran_badly, not_finite, cache_differs, over_limit, precision_warning };

Symptom symptom_of(const ResultRow& r) {
  if (r.status == Verdict::error) return Symptom::ran_badly;
  if (r.status == Verdict::warn) return Symptom::precision_warning;
  if (r.nan_count > 0 || r.inf_count > 0) return Symptom::not_finite;
  if (r.cache_mismatches > 0) return Symptom::cache_differs;
  return Symptom::over_limit;
}

const char* symptom_words(Symptom s) {
  switch (s) {
    case Symptom::ran_badly: return "did not run to an output (error)";
    case Symptom::not_finite: return "NaN or Inf in the output";
    case Symptom::cache_differs: return "the KV cache it left differs";
    case Symptom::over_limit: return "error over the limit";
    case Symptom::precision_warning: return "precision below the baseline's";
  }
  return "";
}

}  // namespace

void print_summary(std::ostream& out, const std::vector<ResultRow>& rows, const std::string& sweep_file,
                   const std::map<std::string, std::string>& labels, const SummaryCommands& commands) {
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
  const std::string program = shell_quote(commands.program);
  const std::filesystem::path results(commands.results);
  const std::string rerun_out = shell_quote((results.has_parent_path() ? results.parent_path() / "rerun.h5"
                                                                       : std::filesystem::path("rerun.h5")).string());
  int group_number = 0;  // across the warnings' and the failures' groups: each bisect line its own folder
  auto list = [&](const char* title, auto keep) {
    // Groups in the order their first row comes; within a group, the rows in order.
    using Signature = std::tuple<std::string, std::string, std::string, Symptom>;
    std::vector<Signature> order;
    std::map<Signature, std::vector<const ResultRow*>> groups;
    int n = 0;
    for (const auto& r : rows) {
      if (!keep(r)) continue;
      ++n;
      const auto key = Signature(r.dut, r.mode, r.dtype, symptom_of(r));
      auto& group = groups[key];
      if (group.empty()) order.push_back(key);
      group.push_back(&r);
    }
    if (n == 0) return 0;
    out << "\n" << title << ": " << n << " in " << order.size() << " group(s) of DUT, mode, dtype and symptom (each run line "
        << "reruns exactly that case):\n";
    for (const auto& key : order) {
      const auto& group = groups[key];
      ++group_number;
      const auto& [dut, mode, dtype, symptom] = key;
      out << "  " << label(dut) << ", " << mode << ", " << dtype << ", " << symptom_words(symptom) << ": " << group.size()
          << " scenario"
          << (group.size() == 1 ? "" : "s") << "\n";
      for (std::size_t i = 0; i < group.size() && i < static_cast<std::size_t>(kGroupShown); ++i) {
        const ResultRow& r = *group[i];
        // Pasted into a shell: every word quoted (an exec: DUT's command has spaces).
        out << "    " << verdict_name(r.status) << " " << r.scenario_id << "\n      " << r.reason << "\n      " << program
            << " run " << shell_quote(sweep_file) << " --filter " << shell_quote_always(r.scenario_id) << " --dut "
            << shell_quote(dut_from_anywhere(r.dut)) << " --out " << rerun_out << "\n";
      }
      if (group.size() > static_cast<std::size_t>(kGroupShown))
        out << "    ... and " << group.size() - kGroupShown << " more like these"
            << (commands.results.empty() ? "" : " (every row is in " + commands.results + ")") << "\n";
      if (!commands.results.empty())
        out << "    diagnose: " << program << " bisect --from " << shell_quote(commands.results) << " --id "
            << shell_quote_always(group.front()->scenario_id) << " --dut " << shell_quote(dut_from_anywhere(dut)) << " --out "
            << shell_quote(((results.has_parent_path() ? results.parent_path() : std::filesystem::path()) /
                            ("bisect-" + std::to_string(group_number))).string())
            << "\n";
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
