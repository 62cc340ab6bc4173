#pragma once
// What bisect concludes about a failure: a class name first, then the evidence in words. The
// report's first line, the --json summary and repro.h5's /diagnosis all carry the same value.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace swa::harness {

enum class FindingSource {
  reading_reproduced,  // a reading of the spec (golden/readings.hpp) reproduces every row of the output
  variant,            // the output matches a built-in variant (a reference carrying one known bug)
  recovered_attention,  // the attention the DUT computed, recovered by least squares, against the golden's
  non_finite_output,  // NaN or Inf where the golden is finite
  value_storage,      // single-key rows show K/V held in a narrower type
  cache_check,        // the KV cache the DUT left, against the golden cache model
  band_measured,      // the window band whose golden gives the output, measured at two windows
  output_placement,   // every failing row is another row's golden output: the rows are in the wrong places
  key_runs_measured,  // each failing row is a softmax over a run of its own keys, measured; the edges' rule fitted
  none,               // nothing tells it
};
const char* finding_source_name(FindingSource s);  // "variant", "recovered attention", ...

// How sure a finding is. `abstained`: bisect does not name a cause (the class is not_told); its
// evidence says what is known (the features the failure needs, the explanations that fit) and the
// experiment that would tell them apart.
enum class Confidence { high, medium, abstained };
const char* confidence_name(Confidence c);  // high | medium | abstained

// The numbers a confidence is read from; confidence_from is the one rule, and its sentence prints
// the numbers beside the word. High needs every failing row reproduced by computing the cause, and
// nothing in the finding's own evidence against it; a class no computation reproduced is at most
// medium, and only when most rows show it; a minority of rows, or a contradiction, abstains.
struct ConfidenceEvidence {
  std::int64_t failing_rows = 0;     // rows the finding must explain
  std::int64_t reproduced_rows = 0;  // of them, reproduced within their limit by computing the cause
  std::int64_t consistent_rows = -1;  // of them, consistent with the class's description (-1: not counted)
  int contradictions = 0;            // lines of the finding's own evidence against it
  bool weak = false;                 // its evidence comes from redrawn inputs or a single row
  std::string untold;                // another cause that gives the same output, not told apart ("" when none)
};
struct ConfidenceRule {
  Confidence confidence;
  std::string why;  // the numbers, in words
};
ConfidenceRule confidence_from(const ConfidenceEvidence& e);

struct Finding {
  Finding() = default;
  Finding(std::string n, FindingSource s, std::vector<std::string> e, Confidence c = Confidence::high, std::string w = {})
      : name(std::move(n)), source(s), evidence(std::move(e)), confidence(c), why(std::move(w)) {}

  std::string name;  // a class: a variant's name, or one of the recovery's (harness/README.md, "bisect")
  FindingSource source = FindingSource::none;
  std::vector<std::string> evidence;  // sentences, most telling first
  Confidence confidence = Confidence::high;
  std::string why;  // why that confidence, in one sentence
  // A computation of the cause reproduced the output (a reading of the spec, a variant to the
  // baseline-level threshold): the ablation then says where it shows, and cannot contradict it.
  bool reproduced = false;
};

}  // namespace swa::harness
