#pragma once
// Failing rows that hold exactly zero. The harness poisons the output with NaN before a DUT runs, so
// a row of +-0 was written: by a kernel that zeroed its output and never computed the row (a query
// tile never planned or never launched), that computed it over no key, or that wrote zeros over it. Either way the row is the
// golden's except that nothing was attended, and the finding says where those rows are.
#include <cstdint>
#include <string>
#include <vector>

#include "finding.hpp"
#include "key_runs.hpp"
#include "swa/harness/case/problem.hpp"

namespace swa::harness {

struct ZeroRows {
  std::int64_t failing = 0;  // failing (token, head) rows
  std::int64_t zero = 0;     // of them, every element +-0
  std::int64_t rows = 0;     // every (token, head) row of the case
};

ZeroRows count_zero_rows(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                         const std::vector<double>& row_limit);
bool every_failing_row_zero(const ZeroRows& z);

// `where`: the failing rows by position; `reading`: a reading of the spec that also gives them (it
// can only do so by emptying their windows), "" when none.
Finding rows_not_computed_finding(const ZeroRows& z, const std::string& where, const std::string& reading);

// Every failing row exactly 0: which rows, when a rule of the rows' positions (key_runs.hpp) gives
// exactly them no key and every other row its window. Held to a probe the DUT fails too, the rule is
// the finding (high); on this case alone it is the finding at medium, a kernel that never computed
// those rows not told apart; without one, rows_not_computed.
Finding zero_rows_finding(const ZeroRows& z, const std::string& where, const std::string& reading,
                          const std::optional<KeyRunFit>& runs);

}  // namespace swa::harness
