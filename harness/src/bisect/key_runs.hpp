#pragma once
// The keys each failing row attends, measured, and the rule its edges follow, fitted. A softmax row
// over one contiguous run [first, last] of its own sequence's keys (its own kv head, the golden's
// scores) has an output bisect can compute for every run at once from prefix sums. Each failing row
// is measured: the runs whose fp64 output gives the DUT's row within the row's limit. Then rules for
// the two edges, each a function of the row's position (an offset, an edge taken from another row of
// a query tile or of the call, an edge rounded to a tile of positions, an edge clamped at the call's
// first row), are fitted to those measurements, and a rule that fits every failing row is held to
// every other row of the same call kinds by computing it. That is a reproduction: the DUT's output is
// the golden's with the rule's runs, row by row. It generalises past the readings table: nothing in
// it knows a fault, only positions, tiles and calls.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "finding.hpp"
#include "swa/harness/case/problem.hpp"

namespace swa::harness {

// What a row's measured keys are: a run of its own keys, its window's keys and zero keys, or its
// window's keys each counted some whole number of times (key_weights.hpp), or its window's splits'
// partial softmaxes merged with other weights (split_merge.hpp).
enum class KeyRunKind { runs, zero_keys, weights, splits };

struct KeyRunFit {
  KeyRunKind kind = KeyRunKind::runs;
  std::int64_t failing = 0;   // failing finite rows (sequence, token, head)
  std::int64_t measured = 0;  // of them, measured (a bounded sample of them in schedule order)
  std::int64_t explained = 0;  // of the measured, reproduced by some run of their own keys
  std::int64_t checked = 0;   // rows of the rule's call kinds the rule was computed on
  std::string name;           // the class: the edges' rule (first_key_..., last_key_...)
  std::string unruled_name = "keys_attended_differ";  // the class when no rule holds (the measurement's)
  std::string words;          // what the DUT computes, in words
  std::string scope;          // the call kinds it holds in ("" = every row failing is of every kind)
  std::vector<std::string> alternatives;  // other rules that fit and hold, in words
  std::vector<std::string> examples;      // a few measured rows: spec run vs the DUT's
  std::string pattern;                    // how the measured runs differ from the window's, in words
  bool reproduced = false;    // the rule holds on every checked row
  std::vector<std::pair<std::string, std::string>> reproducing;  // every rule that holds (class, words), simplest first
  std::int64_t probes_held = 0;  // more cases the DUT fails that the rule reproduces too (hold_key_runs_to_probes)
  std::string refuted;        // the rule reproduced this case, and not this probe (in words)
  double seconds = 0;
};

// Tiles a rule may use besides the common ones (the DUT's own, when it states them).
struct KeyRunTiles {
  std::vector<int> extra;
};

// nullopt when the fit does not apply: the case has no failing finite row, or fewer than all
// measured rows are a run of their own keys (another sequence's keys, another head's, values
// weighed otherwise: not a question of which keys), or the golden's scores could not be recomputed.
std::optional<KeyRunFit> fit_key_runs(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                      const std::vector<double>& row_limit, const KeyRunTiles& tiles = {});

// The finding: high when a rule reproduced every row it was held to; medium when every measured row
// is a run of its keys but no rule of the family fits them all (the runs are then told row by row).
Finding key_run_finding(const KeyRunFit& fit);

}  // namespace swa::harness
