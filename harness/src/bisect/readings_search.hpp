#pragma once
// The search for a reading of the spec that reproduces a DUT's output (readings_table.hpp): on the
// DUT's own inputs, single knobs first (discrete ones enumerated, continuous ones fitted), then pairs;
// a reading reproduces when every row of the output, failing or not, is within its own limit of it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "readings_table.hpp"

namespace swa::harness {

struct ReadingTrial {
  std::vector<ReadingSetting> parts;  // one setting, or two
  std::string scope_words;            // "in decode steps only", or empty
  golden::Reading reading;            // the parts combined, with the scope
  double sse = 0;                     // sum of squared differences to the DUT over the rows compared
  double worst_share = 0;             // the largest |DUT - reading| / limit over those rows
  std::int64_t rows = 0, rows_within = 0;           // rows compared, of them within their limit
  std::int64_t failing = 0, failing_within = 0;     // of them failing against the golden
  double worst_difference = 0;        // the largest |DUT - reading| element
  bool reproduces = false;            // every row of the whole output within its limit
  std::int64_t boundary_rows = 0;     // or all but these, one rounding apart (an intermediate on a rounding boundary)
  std::int64_t order = 0;             // when it was tried: the table's order, singles before pairs

  std::string name() const;   // the class: the parts' names joined by '+'
  std::string words() const;  // "reads V with k_descale in decode steps only"
};

struct ReadingSearch {
  std::vector<ReadingTrial> reproducing;  // the simplest first; more than one when the case cannot tell them apart
  std::optional<ReadingTrial> closest;    // the best that does not reproduce (fewest squared differences)
  double spec_sse = 0;
  bool spec_within_noise = false;  // the golden itself is within the DUT's storage noise of every row: not searched
  // 1, or kL2OnlyLimitShare when no row fails by its max-abs limit (the outputs fail by L2 alone):
  // the rows are then compared at that share of their limit, where the golden leaves some out.
  double limit_share = 1;
  std::int64_t evaluated = 0;
  std::int64_t screened = 0;  // discrete singles first compared on a few rows
  double seconds = 0;
};

inline constexpr double kL2OnlyLimitShare = 0.1;  // "a tenth" in the words
// The limits a reading is held to after the search: row_limit times the search's limit_share.
std::vector<double> search_limits(const ReadingSearch& s, const std::vector<double>& row_limit);

// out: the DUT's output ([nTokens, Hq, D]); ref: the golden's; row_limit: each token row's max-abs
// limit (its phase's). progress(line) is called once per stage.
ReadingSearch search_readings(const AttnParams& p, const std::vector<double>& out, const std::vector<double>& ref,
                              const std::vector<double>& row_limit,
                              const std::function<void(const std::string&)>& progress);

// Whether `reading` reproduces every row of `out` within its limit (the whole output).
ReadingTrial check_reading(const AttnParams& p, const ReadingTrial& trial, const std::vector<double>& out,
                           const std::vector<double>& ref, const std::vector<double>& row_limit);

// The readings of the table named `name` (every call), each checked on the whole output: the one that
// reproduces, else the one with the most failing rows within their limit; nullopt when the table has
// no setting of that name for p. A look-alike (a variant) is held to it.
std::optional<ReadingTrial> check_reading_named(const AttnParams& p, const std::string& name, const std::vector<double>& out,
                                                const std::vector<double>& ref, const std::vector<double>& row_limit);

}  // namespace swa::harness
