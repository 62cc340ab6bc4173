#include "judgement.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "readings_search.hpp"

#include "swa/harness/base/join.hpp"

namespace swa::harness {

const char* confidence_name(Confidence c) {
  switch (c) {
    case Confidence::high: return "high";
    case Confidence::medium: return "medium";
    case Confidence::abstained: return "abstained";
  }
  return "abstained";
}

ConfidenceRule confidence_from(const ConfidenceEvidence& e) {
  const std::string of = " of the " + std::to_string(e.failing_rows) + " failing rows";
  const std::string against = e.contradictions > 0 ? "; " + std::to_string(e.contradictions) + " line(s) of its own evidence against it" : "";
  if (e.failing_rows > 0 && e.reproduced_rows == e.failing_rows && e.contradictions == 0 && !e.weak && e.untold.empty())
    return {Confidence::high, "every one" + of + " reproduced within its limit by computing the cause"};
  if (e.failing_rows > 0 && e.reproduced_rows == e.failing_rows)
    return {Confidence::medium, "every one" + of + " reproduced" + against + (e.weak ? "; from redrawn inputs" : "") +
                                    (e.untold.empty() ? "" : "; " + e.untold + " gives the same output, not told apart")};
  if (e.consistent_rows >= 0) {
    const std::string counted = std::to_string(e.consistent_rows) + of + " show it, none reproduced by computing it" + against;
    if (2 * e.consistent_rows > e.failing_rows && e.contradictions == 0 && !e.weak) return {Confidence::medium, counted};
    return {Confidence::abstained, counted};
  }
  return {Confidence::medium, "no computation reproduced it; a description of the output, not a cause" + against};
}

namespace {

struct ClassFeatures {
  std::set<std::string> must;  // the failure must need these
  std::set<std::string> may;   // it may need these (must is included)
  bool any = false;            // a class that claims nothing about features (a fact about the output)
};

// Features that change which rows are judged together and their limits, or which keys exist: any
// class may need them when its error is near the limit or its keys need a window to go wrong.
const std::set<std::string> kSchedule = {"decode steps", "chunked prefill", "chunks", "ring cache", "linear cache",
                                         "paged cache", "window", "batch"};

ClassFeatures features_of(const std::string& name) {
  auto with = [](std::set<std::string> must, std::set<std::string> may) {
    may.insert(must.begin(), must.end());
    return ClassFeatures{std::move(must), std::move(may), false};
  };
  auto schedule = [&](std::set<std::string> must, std::set<std::string> extra = {}) {
    extra.insert(kSchedule.begin(), kSchedule.end());
    return with(std::move(must), std::move(extra));
  };
  static const std::set<std::string> facts = {"non_finite_output", "output_outside_the_values", "does_not_reproduce",
                                              "dut_did_not_run", "not_told", "output_rows_misplaced",
                                              "fails_after_earlier_calls", "rows_not_computed",
                                              "output_rounded_through_bf16", "output_rounded_through_fp16"};
  if (facts.count(name)) return {{}, {}, true};
  if (name == "window_plus_one" || name == "window_minus_one" || name == "no_window" || name.rfind("window_left_", 0) == 0)
    return schedule(name == "window_left_from_right_edge" ? std::set<std::string>{"two-sided window"} : std::set<std::string>{"window"},
                    {"mask", "window", "two-sided window"});
  if (name == "window_right_follows_left") return with({"two-sided window", "window"}, {});
  if (name.rfind("window_right_", 0) == 0) return with({"two-sided window"}, {});
  if (name == "band_differs") return schedule({}, {"mask", "two-sided window"});
  if (name == "ring_slot_off_by_one" || name == "stale_slot_after_wrap") return schedule({"ring cache"});
  if (name == "sinks_ignored" || name == "sink_in_numerator") return with({"sinks"}, {});
  if (name == "softcap_ignored" || name == "softcap_after_mask") return with({"soft-cap"}, {"window", "mask"});
  // FP8 happens where K/V are written to the cache, read back, and loaded for a chunk's own rows.
  if (name.rfind("fp8_", 0) == 0) return schedule({"FP8 KV"});
  if (name == "page_table_off_by_one" || name == "page_freed_early" || name == "recycled_page_read")
    return schedule({"paged cache"});
  if (name == "gqa_modulo_mapping" || name == "wrong_kv_head") return schedule({});
  if (name.rfind("sink_", 0) == 0) return with({"sinks"}, {"decode steps", "chunked prefill", "chunks"});
  if (name.rfind("softcap_", 0) == 0) return with({"soft-cap"}, {"window"});
  // Which keys: the window, the mask, the schedule and the caches decide which keys exist.
  static const std::set<std::string> keys = {"cross_sequence_leak", "stale_slot_read", "future_keys", "keys_below_the_window",
                                             "extra_keys", "keys_dropped", "own_key_dropped", "key_tile_dropped",
                                             "chunk_prefix_dropped", "chunk_boundary_keys_dropped", "tile_rescale_missing"};
  if (keys.count(name)) return schedule({}, {"mask", "two-sided window"});
  // Measured key runs (key_runs.cpp): which keys, by a rule of the row's position.
  for (const char* prefix : {"first_key_", "last_key_", "window_from_", "block_plan_", "keys_attended_differ", "zero_keys_attended"})
    if (name.rfind(prefix, 0) == 0) return schedule({}, {"mask", "two-sided window"});
  // Split-KV merges (split_merge.cpp): the weights come from each split's scores, so the mask and the sinks move them.
  if (name.rfind("split_", 0) == 0) return schedule({}, {"sinks", "mask", "two-sided window", "soft-cap", "FP8 KV", "dtype"});
  // Keys counted otherwise (key_weights.cpp): which keys, and how many times each.
  if (name.find("_counted_twice") != std::string::npos || name.find("_left_out") != std::string::npos ||
      name == "keys_weighted_otherwise" || name == "keys_outside_the_window_counted")
    return schedule({}, {"mask", "two-sided window"});
  // Precision and weighting: data-dependent, near the limits; the schedule moves the limits.
  if (name == "weights_do_not_sum_right") return schedule({}, {"sinks", "mask", "two-sided window"});
  // Bytes that are no input row's stored form: the storage dtype's or the FP8 encoding's.
  if (name == "stored_values_differ") return schedule({}, {"dtype", "FP8 KV"});
  // A cache in another dimension order: heads and slots interleave, so the heads and the head size move it.
  if (name == "kv_cache_heads_outer" || name == "kv_cache_layout_differs")
    return schedule({}, {"GQA", "head size", "dtype", "FP8 KV"});
  if (name.rfind("kv_stored_as_", 0) == 0 || name == "fp16_pv_accumulation" || name == "no_max_subtraction" ||
      name == "quantised_probabilities" || name == "weights_differ" || name == "precision_only")
    return schedule({}, {"dtype"});
  // wrong_scale and anything new: only the schedule.
  return schedule({});
}

}  // namespace

Finding judge_finding(Finding f, const std::vector<Ablation>& ablations) {
  const std::string needs = needs_sentence(ablations);
  // A cause that reproduces the output was computed, not resembled: the ablation qualifies it (the
  // features it needs) and cannot contradict it.
  if (f.reproduced) {
    // A mode or call kind it needs is where it shows, not a contradiction.
    if (const std::vector<std::string> where = needed_features(ablations, false); !where.empty())
      f.evidence.push_back("It shows only with " + join(where, " and ") + ": without each, same inputs, the DUT passes.");
    f.evidence.push_back(needs);
    return f;
  }
  const ClassFeatures cf = features_of(f.name);
  std::vector<std::string> contradictions;
  if (!cf.any) {
    for (const std::string& must : cf.must)
      if (still_fails_without(ablations, must))
        contradictions.push_back("a " + f.name + " failure needs the " + must + ", but the case still fails without it");
    for (const std::string& feature : needed_features(ablations, false))
      if (!cf.may.count(feature))
        contradictions.push_back("the failure needs the " + feature + " (without it, same inputs, it passes), which " +
                                 f.name + " does not involve: a kernel with that bug alone would fail without it too");
  }
  if (f.confidence != Confidence::abstained && contradictions.empty()) {
    f.evidence.push_back(needs);
    return f;
  }
  if (f.confidence == Confidence::abstained) {  // already an abstention: lead with what is known
    f.evidence.insert(f.evidence.begin(), needs);
    return f;
  }
  Finding a;
  a.name = "not_told";
  a.source = f.source;
  a.confidence = Confidence::abstained;
  a.why = "the ablation contradicts the closest explanation, " + f.name;
  a.evidence.push_back(needs);
  a.evidence.push_back("Closest explanation, contradicted: " + f.name + ": " + join(contradictions, "; ") + ".");
  for (const std::string& e : f.evidence) a.evidence.push_back("(" + f.name + ") " + e);
  return a;
}

bool hold_variant_to_its_reading(Finding& f, const std::string& variant, const AttnParams& p, const std::vector<double>& out,
                                 const std::vector<double>& ref, const std::vector<double>& row_limit) {
  const std::optional<ReadingTrial> t = check_reading_named(p, variant, out, ref, row_limit);
  if (!t || t->reproduces) return false;
  std::ostringstream o;
  o << "the reading " << variant << " (the DUT " << t->words() << "), computed row by row, leaves " << t->failing - t->failing_within
    << " of the " << t->failing << " failing rows over their limit: the variant's match of the whole output is loose";
  f.evidence.push_back(o.str());
  f.reproduced = false;
  if (f.confidence == Confidence::high) f.confidence = Confidence::medium;
  f.why = "at most medium: " + o.str();
  return true;
}

}  // namespace swa::harness
