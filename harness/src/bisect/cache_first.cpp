// Whether the cache went wrong before the outputs did (steps.hpp).
#include <optional>
#include <sstream>
#include <string>

#include "cache_finding.hpp"
#include "steps.hpp"

namespace swa::harness {

std::optional<std::string> cache_went_wrong_first(const Scenario& s, const BisectRun& e) {
  if (e.cache_details.empty() || !e.reference) return std::nullopt;
  const AttnParams& p = e.reference->problem.params;
  const Finding cache = cache_finding(e.cache_details, p);
  if (cache.confidence != Confidence::high || cache.name == "not_told" || cache.name == "cache_geometry_wrong") return std::nullopt;
  // The stored FP8 codes fitted, every one (a region and a rule of the encoder): the values attention
  // reads back from them are wrong where the codes are, whichever call fails first.
  if (cache.reproduced && cache.name.rfind("fp8_encoding_differs_on_", 0) == 0)
    return std::string("The stored FP8 codes are fitted, every one: the encoder differs where the fit says, and the outputs "
                       "fail as K/V read back from those codes would (a call's own rows are encoded on load too).");
  auto place_of_call = [](const std::string& call) -> std::optional<SchedulePlace> {
    std::istringstream in(call);
    std::string word, step;
    std::int64_t index = 0;
    if (!(in >> word)) return std::nullopt;
    if (word == "chunk" && in >> index) return SchedulePlace{false, index};
    if (word == "decode" && in >> step >> index && step == "step") return SchedulePlace{true, index};
    return std::nullopt;
  };
  std::optional<SchedulePlace> cache_first, output_first;
  std::string cache_call;
  for (const CacheMismatch& m : e.cache_details)
    if (const auto at = place_of_call(m.call); at && (!cache_first || *at < *cache_first)) cache_first = at, cache_call = m.call;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h)
        if (row_error(s, e, b, t, h).worst > limit_of(e, b, t)) {
          const SchedulePlace at = place_of(p, b, t);
          if (!output_first || at < *output_first) output_first = at;
          break;
        }
  if (!cache_first || !output_first || !(*cache_first < *output_first)) return std::nullopt;
  std::ostringstream o;
  o << "The cache went wrong first: it differs after " << cache_call << ", and the outputs fail only from "
    << (output_first->decode ? "decode step " : "chunk ") << output_first->index
    << " on, in calls that read it back (the outputs before pass): what they read was written wrong.";
  return o.str();
}

Finding with_the_cache_s_finding(Finding outputs, Finding cache) {
  const std::string first = cache.evidence.empty() ? "" : cache.evidence.front();
  // The cache leads only with a clear finding (its slots alike) or one that accounts for every slot exactly.
  if (outputs.confidence != Confidence::abstained || !(cache.confidence == Confidence::high || cache.reproduced) ||
      cache.name == "not_told" || cache.name == "cache_geometry_wrong" || cache.name == "stored_values_differ") {
    outputs.evidence.push_back("The KV cache differs from the golden's too: " + cache.name + ": " + first);
    return outputs;
  }
  cache.evidence.push_back("The outputs fail too, and tell no mechanism of their own (" + outputs.name +
                           (outputs.why.empty() ? "" : ": " + outputs.why) + "); the cache's finding leads.");
  return cache;
}

}  // namespace swa::harness
