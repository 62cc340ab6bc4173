// bisect: a rule of the key runs held to more cases than the one it was fitted on.
#include <algorithm>
#include <exception>

#include "key_runs.hpp"
#include "steps.hpp"

namespace swa::harness {

void hold_key_runs_to_probes(KeyRunFit& fit, const Scenario& original, const BisectOptions& o,
                             const std::function<void(const std::string&)>& progress) {
  if (!fit.reproduced || fit.reproducing.empty()) return;
  const std::vector<Scenario> probes = look_alike_probes(original);
  progress("key runs: " + std::to_string(fit.reproducing.size()) + " rule(s) reproduce; held to " + std::to_string(probes.size()) +
           " more cases");
  std::vector<std::pair<std::string, std::string>> kept = fit.reproducing;
  for (const Scenario& x : probes) {
    BisectRun e;
    try {
      e = evaluate_case(x, o);
    } catch (const std::exception&) {
      continue;  // a probe the case's limits refuse: no evidence
    }
    if (!e.error.empty() || !e.fails || !e.output_fails || !e.reference) continue;
    const std::optional<KeyRunFit> here =
        fit_key_runs(e.reference->problem, e.out, e.ref, e.row_limit, {{e.traits.query_tile, e.traits.key_tile}});
    std::vector<std::pair<std::string, std::string>> still;
    for (const auto& rule : kept)
      if (here && here->reproduced &&
          std::any_of(here->reproducing.begin(), here->reproducing.end(), [&](const auto& r) { return r.first == rule.first; }))
        still.push_back(rule);
    if (still.empty()) {
      fit.refuted = "A rule of the rows' positions reproduced the case (" + fit.name + ": " + fit.words +
                    "), but no rule that did reproduces " + x.id() + ", which the DUT fails too" +
                    (here && here->reproduced ? " (there: " + here->name + ")" : "") +
                    ": it fits this case's rows, not the kernel's on every case.";
      fit.reproduced = false;
      fit.name = fit.unruled_name;
      fit.words.clear();
      fit.alternatives.clear();
      progress("key runs: refuted on " + x.id());
      return;
    }
    kept = std::move(still);
    ++fit.probes_held;
  }
  fit.name = kept.front().first, fit.words = kept.front().second;
  fit.alternatives.clear();
  for (std::size_t i = 1; i < kept.size() && fit.alternatives.size() < 3; ++i)
    fit.alternatives.push_back(kept[i].first + " (" + kept[i].second + ")");
}

}  // namespace swa::harness
