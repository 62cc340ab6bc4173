#pragma once
// What bisect's steps hand each other (bisect.cpp runs them; each file below is one step's helpers):
// run_case.cpp runs a case and judges it; variant_match.cpp holds the output against the variants;
// localize.cpp says where the failing rows are; reductions.cpp lists smaller cases; describe.cpp
// describes an output no reading or variant reproduces; cache_first.cpp tells a cache that went wrong
// before the outputs; emit.cpp writes the repro and the summary.
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ablation.hpp"
#include "finding.hpp"
#include "key_runs.hpp"
#include "readings_search.hpp"
#include "recover.hpp"
#include "swa/harness/bisect/bisect.hpp"
#include "swa/harness/judge/cache_check.hpp"
#include "swa/harness/judge/evaluate.hpp"

namespace swa::harness {

// One run of the DUT on a scenario for bisect: its output, the reference it is held to, the threshold.
struct BisectRun {
  std::unique_ptr<Reference> reference;  // the problem, the golden and the baseline
  dut::Traits traits;                    // what the DUT says of itself
  std::vector<double> ref, out;
  double threshold = 0, max_abs = 0;     // the whole output's max-abs limit (variants), the DUT's error
  std::vector<double> row_limit;         // per token row: its phase's max-abs limit, as the run's verdict
  bool fails = false;
  bool output_fails = false;             // the outputs fail (not only the KV cache)
  std::string reason;  // the verdict's reason, when it fails
  std::string error;   // the DUT could not run
  std::vector<CacheMismatch> cache_details;
};

// `runs_before`: the same DUT (one instance, one worker process) runs the case that many times first,
// its results discarded: a DUT that keeps state across calls fails only then.
// runs_before: the case's own problem run that many times first, by the same DUT; run_first: those
// scenarios' problems run first, in order, by the same DUT.
BisectRun evaluate_case(const Scenario& s, const BisectOptions& o, int runs_before = 0,
                        const std::vector<Scenario>& run_first = {});
double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b);
// The DUT's output against a variant's: elements non-finite in both the same way agree.
double difference_to_variant(const std::vector<double>& out, const std::vector<double>& variant);
// The sequence holding the largest error (the first non-finite one wins).
int worst_sequence(const BisectRun& e);
// One ablated case, judged as the run judges.
AblationRun ablated(const Scenario& s, const BisectOptions& o);

struct Diagnosis {
  std::vector<std::pair<double, std::string>> ranked;  // error of the DUT against each variant
  std::vector<std::string> silent;  // variants whose output passes here: they cannot explain a failure
  std::string best;
  bool explained = false;
};

// A variant explains the DUT when the difference is at the baseline-level threshold, or under 1% of
// the DUT's own error.
bool explains(double difference, const BisectRun& e);
Diagnosis diagnose(const BisectRun& e);

// Where a query row sits in the schedule: its chunk (prompt rows) or decode step. Rows are compared
// in schedule order: every prompt chunk before the first decode step, chunk c of every sequence
// before chunk c + 1 (the DUT is called once per chunk index and once per step, for all sequences).
struct SchedulePlace {
  bool decode = false;
  std::int64_t index = 0;  // chunk index, or decode step
  friend bool operator<(const SchedulePlace& a, const SchedulePlace& b) {
    return std::pair(a.decode, a.index) < std::pair(b.decode, b.index);
  }
};

SchedulePlace place_of(const AttnParams& p, int b, std::int64_t t);

// The worst |out - ref| of query row (sequence b, token t, head h), infinite when not finite; and
// whether the DUT's own output there is finite.
struct RowError {
  double worst = 0;
  bool finite_output = true;
  bool zero_output = true;  // every element exactly +-0: written as zeros (the harness's fill is NaN)
};

RowError row_error(const Scenario& s, const BisectRun& e, int b, std::int64_t t, int h);
// The max-abs limit of token t of sequence b: its phase's.
double limit_of(const BisectRun& e, int b, std::int64_t t);

// When the outputs fail only in calls after the one whose cache writes first differ, and the cache's
// own finding is clear (cache_finding.hpp, high): the sentence that says so, for a finding led by the
// cache (what the later calls read back was written wrong); or, when the stored FP8 codes are fitted
// every one, the sentence that says so. cache_first.cpp.
std::optional<std::string> cache_went_wrong_first(const Scenario& s, const BisectRun& e);
// The outputs' finding with the cache's beside it as evidence; or, where the outputs' abstains and the
// cache's is clear (high) or accounts for every slot exactly, the cache's, the abstention beside it.
Finding with_the_cache_s_finding(Finding outputs, Finding cache);

struct FailingRow {
  int sequence = 0, head = 0;
  std::int64_t token = 0;
};

// The rows over the threshold in schedule order, at most `limit`; with finite_only, those whose output
// is finite; with nonzero_only, those whose output is not exactly 0 (a zero row tells no weights).
std::vector<FailingRow> failing_rows(const Scenario& s, const BisectRun& e, std::size_t limit, bool finite_only,
                                     bool nonzero_only = false);
// Which rows fail, when only some do; empty when nothing narrows it.
std::vector<std::string> failing_row_pattern(const Scenario& s, const BisectRun& e);
// Which token rows a set holds, per sequence as position ranges, and what lines them up with tiles
// (row_geometry.cpp); the failing rows' (or the non-finite ones', or the failing rows exactly 0),
// empty when every row or none is.
std::string row_set_geometry(const std::vector<std::vector<bool>>& rows, const std::vector<std::int64_t>& lens);
enum class RowsOf { failing, non_finite, failing_zero };
std::string failing_rows_geometry(const Scenario& s, const BisectRun& e, RowsOf which);
// The first failing query row in schedule order, and per sequence its first failing step or chunk.
std::string localize(const Scenario& s, const BisectRun& e);
// Where the output stops being a number, and which NaN the DUT never wrote; empty when all finite.
std::string non_finite_summary(const Scenario& s, const BisectRun& e);

// How small a reduction may go: a row must keep enough keys that a sink, a cap or a scale can be
// told from a missing key (a one-key row makes them alike), and sequences long enough to fill the
// window more than once.
struct ReductionFloor {
  std::int64_t window = 0;
  std::int32_t prompt = 0;
};

ReductionFloor floor_for(const Scenario& original);
// Cases to tell look-alike readings apart on (reductions.cpp).
std::vector<Scenario> look_alike_probes(const Scenario& s);
// The rules the key runs reproduced `original` with, held to its look-alike probes: on each probe the
// DUT fails, only the rules that reproduce it too are kept, and the simplest kept is the fit's. When
// none is kept the rule fitted the case by coincidence: the fit is a measurement again
// (keys_attended_differ), with the probe named. Each probe costs one run of the DUT.
void hold_key_runs_to_probes(KeyRunFit& fit, const Scenario& original, const BisectOptions& o,
                             const std::function<void(const std::string&)>& progress);
// Smaller versions of a scenario, most aggressive first.
std::vector<Scenario> reductions(const Scenario& s, std::int64_t failing_seq, const dut::Traits& traits,
                                 const ReductionFloor& floor);

// The attention the DUT computed for the failing rows, recovered, at a head size that makes the fit
// well posed (at least twice the candidates) when the case's is not and the DUT runs one.
struct Recovery {
  Finding finding;
  std::vector<RecoveredRow> rows;
  std::optional<Scenario> wider;  // the case the rows were fitted at, when not the case itself
};

Recovery recover(const Scenario& s, const BisectRun& e, const BisectOptions& o, bool may_widen = true);
// What the output says when no variant explains it: its non-finite elements, K/V held in a narrower
// type, the dims that fail, FP8 single-key rows, or the recovered attention.
Finding find_without_variant(const Scenario& s, const BisectRun& e, const BisectOptions& o, Recovery* detail);
// Classes that name which keys a kernel reads.
bool names_keys(const std::string& name);

// The summary CI bots read (--json, DIR/summary.json).
// One line on stderr: "swa-harness bisect: [12.3 s] LINE", the time since `start`.
void print_progress(std::chrono::steady_clock::time_point start, const std::string& line);

struct Summary {
  bool reproduces = false;
  std::string dut_error;
  Finding finding;
  std::vector<std::string> pattern;
  double max_abs = 0, threshold = 0;
  std::string reason, minimal_case;
  std::vector<std::pair<double, std::string>> variants;
  std::optional<ReadingSearch> readings;
  std::vector<Ablation> ablations;
  std::vector<std::pair<std::string, std::string>> files;
  double seconds = 0;
};

std::string summary_json(const Scenario& s, const BisectOptions& o, const Summary& m);
// The report's first lines: the finding, its confidence and why, its evidence, the failing rows.
std::string finding_text(const Summary& m);
// The run's tolerance as sweep-file keys, so the repro is judged by the same rule.
std::string tolerance_yaml(const Scenario& s);
void write_repro(const std::filesystem::path& path, const Scenario& s, const BisectRun& e, const BisectOptions& o,
                 const Finding& finding, const Recovery* recovery, const std::vector<Ablation>& ablations);

}  // namespace swa::harness
