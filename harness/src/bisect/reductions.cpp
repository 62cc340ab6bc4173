// bisect: the smaller cases a reduction tries.
#include "steps.hpp"

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include "ablation.hpp"
#include "band.hpp"
#include "cache_finding.hpp"
#include "finding.hpp"
#include "judgement.hpp"
#include "readings_search.hpp"
#include "recover.hpp"
#include "semantics.hpp"
#include "swa/baseline.hpp"
#include "swa/golden.hpp"
#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/judge/evaluate.hpp"
#include "swa/harness/judge/verdict.hpp"
#include "swa/harness/case/problem_file.hpp"
#include "swa/harness/base/join.hpp"
#include "swa/harness/judge/metrics.hpp"

namespace fs = std::filesystem;

namespace swa::harness {

ReductionFloor floor_for(const Scenario& original) {
  return {std::min<std::int64_t>(original.window, 8),
          std::min<std::int32_t>(*std::max_element(original.prompt_lens.begin(), original.prompt_lens.end()), 16)};
}

// Smaller versions of a scenario, most aggressive first.
std::vector<Scenario> reductions(const Scenario& s, std::int64_t failing_seq, const dut::Traits& traits,
                                 const ReductionFloor& floor) {
  std::vector<Scenario> out;
  if (s.prompt_lens.size() > 1) {
    Scenario r = s;
    r.prompt_lens = {s.prompt_lens[failing_seq]};
    out.push_back(r);
  }
  for (auto [hq, hkv] : {std::pair{1, 1}, {2, 1}, {2, 2}, {4, 2}})
    if (hq * 1.0 < s.heads || (hq == s.heads && hkv < s.kv_heads)) {
      Scenario r = s;
      r.heads = hq;
      r.kv_heads = hkv;
      out.push_back(r);
    }
  {
    Scenario r = s;
    bool shorter = false;
    for (auto& len : r.prompt_lens)
      if (len > floor.prompt) {
        len = std::max((len + 1) / 2, floor.prompt);
        shorter = true;
      }
    if (shorter) out.push_back(r);
  }
  if (s.mode == RunMode::decode && s.decode_steps > 1) {
    Scenario r = s;
    r.decode_steps = (s.decode_steps + 1) / 2;
    out.push_back(r);
  }
  // The smallest head size the DUT runs (any DUT: 16), never one it would skip.
  const std::vector<int> head_sizes = traits.head_sizes.empty() ? std::vector<int>{16, 32, 64} : traits.head_sizes;
  for (int d : head_sizes)
    if (d < s.head_size) {
      Scenario r = s;
      r.head_size = d;
      out.push_back(r);
      break;
    }
  if (s.window > std::max<std::int64_t>(1, floor.window) && s.mask == MaskFormat::none) {
    Scenario r = s;
    r.window = std::max((s.window + 1) / 2, floor.window);
    if (r.chunk > 0 && s.mode != RunMode::prefill) r.chunk = std::max(1, std::min(r.chunk, static_cast<int>(r.window) + 1));
    out.push_back(r);
  }
  return out;
}

// Cases beside the first where rules of tiles, of calls or of the window's edges that reproduced it
// alike part ways: a window one key wider, and one wider than twice itself (past a tile of it); a
// right edge 11 keys wider; twice the query and kv heads (the same groups: head maps that coincided
// part ways); twice the decode steps and 7 more; sequences twice as long and 7 more (past a tile of
// their length).
std::vector<Scenario> look_alike_probes(const Scenario& s) {
  std::vector<Scenario> probes;
  if (s.window > 0)
    for (const std::int64_t window : {s.window + 1, s.window * 2 + 3}) {
      Scenario w = s;
      w.window = window;
      probes.push_back(w);
    }
  if (s.window_right > 0) {
    Scenario w = s;
    w.window_right += 11;
    probes.push_back(w);
  }
  if (s.kv_heads > 1 && s.heads > s.kv_heads && s.heads <= 32) {
    Scenario more = s;  // the same group size on twice the heads: head maps that coincided part ways
    more.heads *= 2, more.kv_heads *= 2;
    probes.push_back(more);
  }
  if (s.mode == RunMode::decode && s.decode_steps > 0 && s.decode_steps <= 256) {
    Scenario steps = s;  // positions past more page and tile boundaries
    steps.decode_steps = s.decode_steps * 2 + 7;
    probes.push_back(steps);
  }
  if (s.softcap > 0.f) {
    Scenario capped = s;  // a cap that bites: readings that agree where tanh is nearly linear part ways
    capped.softcap = s.softcap / 4;
    probes.push_back(capped);
  }
  if (s.kv_dtype != KvFormat::dtype) {
    Scenario descales = s;  // other descales (drawn from the seed): readings that coincide at one part ways
    descales.seed = s.seed + 1;
    probes.push_back(descales);
  }
  if (std::all_of(s.prompt_lens.begin(), s.prompt_lens.end(), [](std::int32_t n) { return n <= 1024; })) {
    Scenario longer = s;
    for (auto& n : longer.prompt_lens) n = n * 2 + 7;
    probes.push_back(longer);
  }
  return probes;
}

}  // namespace swa::harness
