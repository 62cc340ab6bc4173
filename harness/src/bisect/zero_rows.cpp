#include "zero_rows.hpp"

#include "row_runs.hpp"

namespace swa::harness {

using namespace key_run_rules;

ZeroRows count_zero_rows(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                         const std::vector<double>& row_limit) {
  const AttnParams& p = pr.params;
  ZeroRows z;
  if (out.size() != ref.size()) return z;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        const RowPlace r = place(p, b, t, h);
        ++z.rows;
        if (row_passes(pr, out, ref, row_limit, r)) continue;
        ++z.failing;
        const double* o = row_of(out, pr, r);
        bool zero = true;
        for (int x = 0; x < p.head_size && zero; ++x) zero = o[x] == 0.0;
        z.zero += zero;
      }
  return z;
}

bool every_failing_row_zero(const ZeroRows& z) { return z.failing > 0 && z.zero == z.failing; }

Finding rows_not_computed_finding(const ZeroRows& z, const std::string& where, const std::string& reading) {
  std::vector<std::string> evidence = {
      "Every one of the " + std::to_string(z.failing) + " failing rows (of " + std::to_string(z.rows) +
          " (token, head) rows) holds exactly 0 in every element; the others pass. The harness fills the output with NaN "
          "before the DUT runs, so these rows were written as zeros: the kernel never computed them (a query tile not "
          "planned, not launched, or its rows past a loop's bound, over an output it zeroed), computed them over no key "
          "or over values that are zeros (memory never written), or wrote zeros over them afterwards (a padded write-back).",
      "Reproduced: the golden with those rows set to 0 is the DUT's output, row by row."};
  if (!where.empty()) evidence.push_back("The rows not computed, by position: " + where + ".");
  if (!reading.empty())
    evidence.push_back("A reading of the spec gives them too, only by leaving their windows empty: " + reading +
                       "; told apart from a kernel that skips the rows only by a case where those rows' windows are not empty.");
  Finding f{"rows_not_computed", FindingSource::none, evidence, Confidence::high,
            "computed: every failing row is exactly 0 and every other row passes"};
  f.reproduced = true;
  return f;
}

Finding zero_rows_finding(const ZeroRows& z, const std::string& where, const std::string& reading,
                          const std::optional<KeyRunFit>& runs) {
  if (!runs || !runs->reproduced || runs->kind != KeyRunKind::runs) return rows_not_computed_finding(z, where, reading);
  Finding f = key_run_finding(*runs);
  const std::string zero = "The " + std::to_string(z.failing) + " failing rows hold exactly 0 in every element (written as "
                           "zeros over the harness's NaN fill): the rule leaves each of them no key, and gives every other "
                           "row its window" + (where.empty() ? "" : " (the rows exactly 0, by position: " + where + ")") + ".";
  f.evidence.insert(f.evidence.begin() + 1, zero);
  if (runs->probes_held == 0) {
    ConfidenceEvidence ce;
    ce.failing_rows = ce.reproduced_rows = z.failing;
    ce.untold = "a kernel that never computed those rows (over an output it zeroed)";
    const ConfidenceRule rule = confidence_from(ce);
    f.confidence = rule.confidence, f.why = rule.why;
    f.evidence.push_back("Not held to another case the DUT fails: rows never computed give the same zeros here.");
  }
  return f;
}

}  // namespace swa::harness
