#pragma once
// What bisect concludes about a failure: a class name first, then the evidence in words. The
// report's first line, the --json summary and repro.h5's /diagnosis all carry the same value.
#include <string>
#include <vector>

namespace swa::harness {

enum class FindingSource {
  variant,            // the output matches a built-in variant (a reference carrying one known bug)
  recovered_attention,  // the attention the DUT computed, recovered by least squares, against the golden's
  non_finite_output,  // NaN or Inf where the golden is finite
  value_storage,      // single-key rows show K/V held in a narrower type
  none,               // nothing tells it
};
const char* finding_source_name(FindingSource s);  // "variant", "recovered attention", ...

struct Finding {
  std::string name;  // a class: a variant's name, or one of the recovery's (harness/README.md, "bisect")
  FindingSource source = FindingSource::none;
  std::vector<std::string> evidence;  // sentences, most telling first
};

}  // namespace swa::harness
