#pragma once
// What bisect concludes about a failure: a class name first, then the evidence in words. The
// report's first line, the --json summary and repro.h5's /diagnosis all carry the same value.
#include <string>
#include <utility>
#include <vector>

namespace swa::harness {

enum class FindingSource {
  variant,            // the output matches a built-in variant (a reference carrying one known bug)
  recovered_attention,  // the attention the DUT computed, recovered by least squares, against the golden's
  non_finite_output,  // NaN or Inf where the golden is finite
  value_storage,      // single-key rows show K/V held in a narrower type
  cache_check,        // the KV cache the DUT left, against the golden cache model
  band_measured,      // the window band whose golden gives the output, measured at two windows
  none,               // nothing tells it
};
const char* finding_source_name(FindingSource s);  // "variant", "recovered attention", ...

// How sure a finding is. `abstained`: bisect does not name a cause (the class is not_told); its
// evidence says what is known (the features the failure needs, the explanations that fit) and the
// experiment that would tell them apart.
enum class Confidence { high, medium, abstained };
const char* confidence_name(Confidence c);  // high | medium | abstained

struct Finding {
  Finding() = default;
  Finding(std::string n, FindingSource s, std::vector<std::string> e, Confidence c = Confidence::high, std::string w = {})
      : name(std::move(n)), source(s), evidence(std::move(e)), confidence(c), why(std::move(w)) {}

  std::string name;  // a class: a variant's name, or one of the recovery's (harness/README.md, "bisect")
  FindingSource source = FindingSource::none;
  std::vector<std::string> evidence;  // sentences, most telling first
  Confidence confidence = Confidence::high;
  std::string why;  // why that confidence, in one sentence
};

}  // namespace swa::harness
