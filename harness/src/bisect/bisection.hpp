#pragma once
// One bisection as named steps over the state they hand on (bisect.cpp drives them; the readings
// search and the probes that hold a finding to other cases are bisection_probes.cpp).
#include <chrono>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "ablation.hpp"
#include "finding.hpp"
#include "key_runs.hpp"
#include "placement.hpp"
#include "readings_search.hpp"
#include "steps.hpp"
#include "zero_rows.hpp"
#include "swa/harness/bisect/bisect.hpp"

namespace swa::harness {

// Each step writes its section of the report; an early ending (the DUT did not run, the failure does
// not reproduce) still writes the report and the summary (finish()).
class Bisection {
 public:
  Bisection(const Scenario& original, const BisectOptions& o, std::ostream& log)
      : original_(original), o_(o), log_(log), t0_(std::chrono::steady_clock::now()) {
    head_ << "swa-harness bisect report\n=========================\n"
          << "DUT:        " << o.dut << "\nReference:  " << (o.against == "golden" ? "the fp64 golden" : o.against)
          << "\nScenario:   " << original.id() << "\n\n";
  }

  // 1. Reproduce: run the case (and reruns); an ending when the DUT cannot run or passes.
  std::optional<int> reproduce();
  // 1 (cont.). The case passes: run again by the same DUT after more runs of itself, then after the
  // scenarios the sweep ran before it; true (the finding set) when it fails there.
  bool fails_after_earlier_calls();
  // 2. Localize: which rows fail, and where in the schedule.
  void localize_rows();
  // 3. Ablate: which features the failure needs, before any fit.
  void ablate();
  // 4. Diagnose: the cache's differences when only the cache fails; otherwise the variants.
  void diagnose_output();
  // 4 (cont.). The band the DUT attends, measured, when a band variant matched or none did.
  void measure_attended_band();
  // 5. Reduce while the evidence holds.
  void reduce();
  // 6. The finding, judged against the ablation.
  void conclude();
  void tell_the_zero_rows();
  // 6/7. The repro files.
  void emit_files();
  // Writes report.txt and summary.json (the finding first), prints one, returns `status`.
  int finish(int status);

 private:
  std::string class_of(const Scenario& x, const BisectRun& e) const;
  bool still_needs(const Scenario& candidate, const BisectRun& e) const;
  void word_diagnosis();
  void search_for_a_reading();
  Finding reading_finding() const;
  // Drops the look-alike readings that do not reproduce a case the DUT fails (e); false when none does.
  bool tell_apart(const Scenario& x, const BisectRun& e);
  // When the outputs fail only in calls after the cache first differs, and the cache's finding is
  // clear: the sentence that says so (what the later calls read back was written wrong).
  std::optional<std::string> cache_went_wrong_first() const;
  void tell_apart_on_probes();
  // An exact variant that the facts of the output (zero rows, a narrower grid) give too: held to the
  // first look-alike probe the DUT fails (true when none fails, or the variant computes it exactly).
  bool variant_holds_on_a_probe();
  // One line on stderr per step, with the time so far: a long bisect is never silent.
  void progress(const std::string& line) const;

  const Scenario& original_;
  const BisectOptions& o_;
  std::ostream& log_;
  const std::chrono::steady_clock::time_point t0_;
  std::ostringstream head_, r_;
  Summary summary_;
  BisectRun first_;
  std::vector<Ablation> ablations_;
  std::vector<std::string> needed_;
  bool cache_only_ = false;
  Diagnosis diag_;
  std::optional<ReadingTrial> reading_;  // the simplest reading that reproduces the DUT, when one does
  std::optional<Placement> placement_;   // when none does: the failing rows as other rows' golden outputs
  std::optional<KeyRunFit> key_runs_;    // or: each failing row a run of its own keys, the edges' rule fitted
  std::string where_failing_, where_not_finite_, where_zero_;
  ZeroRows zero_rows_;                   // the original case's failing rows that hold exactly 0
  std::optional<Finding> narrower_output_;  // the original case's output stored through a narrower type
  std::vector<ReadingTrial> alike_;      // every reading that reproduced each failing case tried so far
  std::vector<std::string> told_apart_;  // "X: it leaves 3 of 40 rows over their limit on CASE"
  std::string refuted_;                  // a probe the DUT fails that the reading does not reproduce, in words
  std::optional<Finding> band_;
  bool suspicious_ = false;
  bool variant_unlike_reading_ = false;  // the variant matched, the reading of its name does not reproduce
  Scenario minimal_;
  BisectRun minimal_eval_;
  Recovery recovery_;
  int step_ = 6;
};

}  // namespace swa::harness
