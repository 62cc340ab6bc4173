#include "swa/harness/case/coverage.hpp"

#include <algorithm>
#include <functional>

namespace swa::harness {
namespace {

bool two_sided(const Scenario& s) { return s.window_right != 0; }
bool paged_fp8(const Scenario& s) {
  return s.mode != RunMode::prefill && s.cache == CachePolicy::paged && is_fp8(s.kv_dtype);
}

// A feature: whether a scenario has it, and how to give it to a probe scenario.
struct Feature {
  std::string_view name;
  std::function<bool(const Scenario&)> on;
  std::function<void(Scenario&)> set;
};

const std::vector<Feature>& score_and_storage_features() {
  static const std::vector<Feature> features = {
      {"sinks", [](const Scenario& s) { return s.sinks != Sinks::none; }, [](Scenario& s) { s.sinks = Sinks::learned; }},
      {"softcap", [](const Scenario& s) { return s.softcap > 0.f; }, [](Scenario& s) { s.softcap = 10.f; }},
      {"two-sided", two_sided, [](Scenario& s) { s.window_right = 2; }},
      {"fp8-e4m3", [](const Scenario& s) { return s.kv_dtype == KvFormat::fp8_e4m3; },
       [](Scenario& s) { s.kv_dtype = KvFormat::fp8_e4m3; }},
      {"fp8-e5m2", [](const Scenario& s) { return s.kv_dtype == KvFormat::fp8_e5m2; },
       [](Scenario& s) { s.kv_dtype = KvFormat::fp8_e5m2; }},
      {"mask-swa-norm", [](const Scenario& s) { return s.mask == MaskFormat::swa_norm; },
       [](Scenario& s) { s.mask = MaskFormat::swa_norm; }},
      {"mask-swa-compress", [](const Scenario& s) { return s.mask == MaskFormat::swa_compress; },
       [](Scenario& s) { s.mask = MaskFormat::swa_compress; }},
  };
  return features;
}

// The pairs whose order a kernel can mix up (issue 55; ci.yaml's feature_pairs sweep).
struct Pair {
  std::string_view name;
  std::function<bool(const Scenario&)> on;
};
const std::vector<Pair>& score_feature_pairs() {
  static const std::vector<Pair> pairs = {
      {"sinks x softcap", [](const Scenario& s) { return s.sinks != Sinks::none && s.softcap > 0.f; }},
      {"softcap x two-sided", [](const Scenario& s) { return s.softcap > 0.f && two_sided(s); }},
      {"sinks x two-sided", [](const Scenario& s) { return s.sinks != Sinks::none && two_sided(s); }},
      {"sinks x fp8 x paged", [](const Scenario& s) { return s.sinks != Sinks::none && paged_fp8(s); }},
      {"softcap x fp8 x paged", [](const Scenario& s) { return s.softcap > 0.f && paged_fp8(s); }},
  };
  return pairs;
}

// The cache column: prefill has no cache.
std::string cache_column(RunMode mode, CachePolicy cache) {
  return mode == RunMode::prefill ? std::string("-") : std::string(cache_name(cache));
}

// A small scenario of the cell; allowed when either API's rules take it.
bool allowed(const Feature* feature, RunMode mode, DType dtype, CachePolicy cache) {
  Scenario s;
  s.mode = mode;
  s.dtype = dtype;
  s.cache = cache;
  s.prompt_lens = {8};
  s.heads = 2;
  s.kv_heads = 1;
  s.window = 4;
  s.chunk = mode == RunMode::chunked_prefill ? 2 : 0;
  s.decode_steps = mode == RunMode::decode ? 1 : 0;
  s.page_size = 4;
  if (feature) feature->set(s);
  return !scenario_fault(s, Api::generic) || !scenario_fault(s, Api::atb);
}

}  // namespace

std::vector<std::string> Coverage::gaps() const {
  std::vector<std::string> out;
  for (const auto& c : cells)
    if (c.scenarios == 0)
      out.push_back(c.feature + " " + std::string(mode_name(c.mode)) + " " + std::string(dtype_name(c.dtype)) + " " +
                    c.cache);
  for (const auto& p : pairs)
    if (p.scenarios == 0) out.push_back(p.name);
  return out;
}

Coverage coverage_of(const std::vector<Scenario>& scenarios) {
  Coverage c;
  c.scenarios = static_cast<std::int64_t>(scenarios.size());
  const auto& features = score_and_storage_features();
  // "plain" first: a scenario with none of the features.
  std::vector<const Feature*> rows = {nullptr};
  for (const auto& f : features) rows.push_back(&f);
  for (const Feature* f : rows)
    for (RunMode mode : kAllRunModes)
      for (DType dtype : kAllDTypes)
        for (CachePolicy cache : kAllCachePolicies) {
          if (mode == RunMode::prefill && cache != kAllCachePolicies[0]) continue;  // prefill: one cell, no cache
          if (!allowed(f, mode, dtype, cache)) continue;
          CoverageCell cell{f ? std::string(f->name) : "plain", mode, dtype, cache_column(mode, cache), 0};
          for (const auto& s : scenarios) {
            if (s.mode != mode || s.dtype != dtype || cache_column(s.mode, s.cache) != cell.cache) continue;
            const bool has = f ? f->on(s)
                               : std::none_of(features.begin(), features.end(), [&](const Feature& g) { return g.on(s); });
            if (has) ++cell.scenarios;
          }
          c.cells.push_back(std::move(cell));
        }
  for (const auto& p : score_feature_pairs())
    c.pairs.push_back({std::string(p.name), std::count_if(scenarios.begin(), scenarios.end(), p.on)});
  return c;
}

}  // namespace swa::harness
