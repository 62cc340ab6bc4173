// Bisect's judgement of a finding against the ablation, and the cache finding's classes, on
// hand-made inputs: a contradicted class is an abstention that leads with the needed features, a
// consistent one keeps its confidence; cache differences are named by what the slots hold.
#define BOOST_TEST_MODULE harness_bisect_judgement
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "../src/bisect/cache_finding.hpp"
#include "../src/bisect/judgement.hpp"
#include "../src/bisect/recover.hpp"
#include "../src/bisect/semantics.hpp"

using namespace swa::harness;

namespace swa::harness {
std::ostream& operator<<(std::ostream& o, Confidence c) { return o << confidence_name(c); }
}  // namespace swa::harness

namespace {

Ablation ablation(std::string feature, AblationOutcome outcome, bool redrawn = false) {
  Ablation a;
  a.feature = std::move(feature);
  a.change = "off";
  a.outcome = outcome;
  a.redraws_inputs = redrawn;
  return a;
}

bool contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_class_that_does_not_involve_a_needed_feature_is_an_abstention) {
  // A wrong scale would fail without the soft-cap too; this failure passes without it.
  const std::vector<Ablation> abl = {ablation("soft-cap", AblationOutcome::passes), ablation("window", AblationOutcome::fails)};
  const Finding f = judge_finding(Finding{"wrong_scale", FindingSource::recovered_attention, {"slope 0.69"}}, abl);
  BOOST_TEST(f.name == "not_told");
  BOOST_TEST(f.confidence == Confidence::abstained);
  BOOST_TEST(f.evidence.front().find("The failure needs soft-cap") == 0);
  BOOST_TEST(contains(f.evidence, "Closest explanation, contradicted: wrong_scale"));
}

BOOST_AUTO_TEST_CASE(a_class_whose_feature_is_not_needed_is_an_abstention) {
  // sinks_ignored, yet turning the sinks off does not make the failure go away.
  const std::vector<Ablation> abl = {ablation("sinks", AblationOutcome::fails)};
  const Finding f = judge_finding(Finding{"sinks_ignored", FindingSource::variant, {"matches"}}, abl);
  BOOST_TEST(f.confidence == Confidence::abstained);
  BOOST_TEST(contains(f.evidence, "needs the sinks, but the case still fails without it"));
}

BOOST_AUTO_TEST_CASE(a_consistent_class_keeps_its_confidence_and_gains_the_needs) {
  const std::vector<Ablation> abl = {ablation("sinks", AblationOutcome::passes), ablation("decode steps", AblationOutcome::passes),
                                     ablation("head size", AblationOutcome::fails, true)};
  const Finding f = judge_finding(Finding{"sink_left_out", FindingSource::recovered_attention, {"sum 1"}}, abl);
  BOOST_TEST(f.name == "sink_left_out");
  BOOST_TEST(f.confidence == Confidence::high);
  BOOST_TEST(contains(f.evidence, "needs sinks and decode steps"));
  // An ablation that redraws the inputs never contradicts: a wrong scale that passes at another head size.
  const std::vector<Ablation> redrawn = {ablation("head size", AblationOutcome::passes, true)};
  BOOST_TEST(judge_finding(Finding{"wrong_scale", FindingSource::recovered_attention, {"slope"}}, redrawn).confidence ==
             Confidence::high);
}

BOOST_AUTO_TEST_CASE(stored_bytes_of_no_row_involve_the_fp8_encoding_they_name) {
  // The cache holds bytes no input row's FP8 form gives, and the failure needs FP8: the class's own
  // mechanism (the encoding), not a contradiction.
  const std::vector<Ablation> abl = {ablation("FP8 KV", AblationOutcome::passes), ablation("chunked prefill", AblationOutcome::passes)};
  const Finding f = judge_finding(Finding{"stored_values_differ", FindingSource::cache_check, {"no input row's stored form"}}, abl);
  BOOST_TEST(f.name == "stored_values_differ");
}

BOOST_AUTO_TEST_CASE(a_fact_about_the_output_is_never_contradicted) {
  const std::vector<Ablation> abl = {ablation("decode steps", AblationOutcome::passes)};
  BOOST_TEST(judge_finding(Finding{"non_finite_output", FindingSource::non_finite_output, {"NaN"}}, abl).name ==
             "non_finite_output");
}

namespace {

CacheMismatch slot(int seq, std::int64_t s, std::int64_t expected, CacheMismatch::Held kind, std::int64_t held = -1) {
  return {.kind = CacheMismatch::Kind::slot, .call = "chunk 1", .sequence = seq, .slot = s, .held_kind = kind,
          .held_sequence = seq, .held = held, .expected = expected};
}

swa::AttnParams ring(std::int64_t window) {
  swa::AttnParams p;
  p.mode = swa::RunMode::chunked_prefill;
  p.cache = swa::CachePolicy::ring_modulo;
  p.band = {window - 1, 0};
  p.chunk = 4;
  p.decode_steps = 0;
  return p;
}

// Sequences of these lengths, owned here, set on a case's params.
struct Sequences {
  std::vector<std::int32_t> lens;
  std::vector<std::int64_t> offsets{0};
  explicit Sequences(std::vector<std::int32_t> l) : lens(std::move(l)) {
    for (std::int32_t n : lens) offsets.push_back(offsets.back() + n);
  }
  void set(swa::AttnParams& p) {
    p.batch = static_cast<int>(lens.size());
    p.seq_lens = lens.data();
    p.seq_offsets = offsets.data();
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(cache_differences_are_named_by_what_the_slots_hold) {
  using H = CacheMismatch::Held;
  const swa::AttnParams p = ring(8);
  Sequences one({16});
  swa::AttnParams q = p;
  one.set(q);
  // A ring slot still holding the position a full ring earlier: never written.
  BOOST_TEST(cache_finding({slot(0, 3, 11, H::position, 3), slot(0, 4, 12, H::position, 4)}, q).name == "rows_not_written");
  // Another position of the same sequence, one later in every slot: a shifted slot formula.
  const Finding shifted = cache_finding({slot(0, 3, 11, H::position, 12), slot(0, 4, 12, H::position, 13)}, q);
  BOOST_TEST(shifted.name == "wrong_slot");
  BOOST_TEST(contains(shifted.evidence, "held minus expected: 1 in every one"));
  // Something where nothing belongs, whatever it is.
  BOOST_TEST(cache_finding({slot(0, 15, -1, H::no_position)}, q).name == "rows_written_outside");
  // Bytes that are no input row's stored form, where a row belongs.
  BOOST_TEST(cache_finding({slot(0, 3, 11, H::no_position)}, q).name == "stored_values_differ");
  // Only tokens_written.
  CacheMismatch tw;
  tw.kind = CacheMismatch::Kind::tokens_written;
  tw.call = "decode step 0";
  tw.got_value = 20;
  tw.expected_value = 21;
  const Finding t = cache_finding({tw}, q);
  BOOST_TEST(t.name == "tokens_written_wrong");
  BOOST_TEST(contains(t.evidence, "does not count every row"));
  BOOST_TEST(cache_finding({}, q).confidence == Confidence::abstained);
}

BOOST_AUTO_TEST_CASE(a_ring_slot_rule_is_fitted_to_the_slots_the_dut_filled) {
  using H = CacheMismatch::Held;
  // A compact ring of 8 and chunks of 33: sequence 0's first write keeps positions 25..32 (base 25),
  // sequence 1's single token sits at slot 0 (base 0). A DUT that takes sequence 0's base for both
  // puts sequence 1's position 0 at slot (0 - 25) mod 8 = 7.
  swa::AttnParams p = ring(8);
  p.cache = swa::CachePolicy::ring_compact;
  p.chunk = 33;
  Sequences two({40, 1});
  two.set(p);
  const Finding f = cache_finding({slot(1, 7, -1, H::position, 0), slot(1, 0, 0, H::zeros)}, p);
  BOOST_TEST(f.name == "ring_slot_rule_wrong");
  BOOST_TEST(f.confidence == Confidence::high);
  BOOST_TEST(contains(f.evidence, "the first sequence's base for every sequence: sequence 1 base 25, the rule's 0"));
}

// A chunk's write that wraps past the ring's end copied in two parts, the wrapped part from slot 1:
// chunks of 5 into a ring of 8, after chunk 1 (positions 5..9) positions 8 and 9 sit at slots 1 and 2.
// The three differing slots alone fit a ring of 7 slots too; the slots the DUT has right (slot 7
// holds position 7, which a ring of 7 would put at slot 0) rule that out.
BOOST_AUTO_TEST_CASE(a_ring_slot_rule_is_held_to_the_slots_the_dut_has_right) {
  using H = CacheMismatch::Held;
  swa::AttnParams p = ring(8);
  p.chunk = 5;
  Sequences one({16});
  one.set(p);
  std::vector<CacheMismatch> slots = {slot(0, 0, 8, H::position, 0), slot(0, 1, 9, H::position, 8),
                                      slot(0, 2, 2, H::position, 9)};
  const Finding differing_only = cache_finding(slots, p);
  BOOST_TEST(contains(differing_only.evidence, "a ring of W - 1 slots"));
  slots[0].model_positions = {8, 9, 2, 3, 4, 5, 6, 7};
  const Finding f = cache_finding(slots, p);
  BOOST_TEST(f.name == "ring_slot_rule_wrong");
  BOOST_TEST(f.confidence == Confidence::high);
  BOOST_TEST(contains(f.evidence, "wraps past slot W - 1 is copied from slot 1 instead of slot 0"));
  BOOST_TEST(contains(f.evidence, "so do all 5 slots the DUT has right"));
}

// A cause that reproduced the output is qualified by where it shows, never contradicted: a soft-cap
// missing only in chunked-prefill calls needs the chunked prefill, and that is where it is.
BOOST_AUTO_TEST_CASE(a_reproduced_cause_is_qualified_by_the_mode_it_needs_not_contradicted) {
  Finding f{"softcap_ignored", FindingSource::variant, {"the output matches the variant softcap_ignored"}, Confidence::high, "exact"};
  f.reproduced = true;
  const std::vector<Ablation> ablations = {ablation("soft-cap", AblationOutcome::passes),
                                           ablation("chunked prefill", AblationOutcome::passes)};
  const Finding judged = judge_finding(f, ablations);
  BOOST_TEST(judged.name == "softcap_ignored");
  BOOST_TEST(judged.confidence == Confidence::high);
  BOOST_TEST(contains(judged.evidence, "It shows only with soft-cap and chunked prefill"));
  // The same class, not reproduced, is contradicted by the mode it cannot involve.
  f.reproduced = false;
  BOOST_TEST(judge_finding(f, ablations).name == "not_told");
}

BOOST_AUTO_TEST_CASE(a_cache_in_another_dimension_order_is_told_and_the_heads_outer_order_computed) {
  using H = CacheMismatch::Held;
  // A linear cache of 8 slots and 2 kv heads written as [kv_heads, slots, head_size]: the spec's slot
  // s, head h is the DUT's flat head f = 2 s + h, that is head f / 8 of slot f % 8.
  swa::AttnParams p;
  p.mode = swa::RunMode::chunked_prefill;
  p.cache = swa::CachePolicy::linear;
  p.chunk = 4;
  p.heads_q = p.heads_kv = 2;
  p.head_size = 4;
  Sequences one({8});
  one.set(p);
  p.band = {7, 0};
  auto at = [](std::int64_t s, std::vector<CacheMismatch::HeadRow> heads) {
    CacheMismatch m = slot(0, s, s, H::no_position);
    m.head_holds = {CacheMismatch::kHeadOther, CacheMismatch::kHeadOther};
    m.head_rows = std::move(heads);
    return m;
  };
  std::vector<CacheMismatch> heads_outer = {at(3, {{0, 6, 0}, {0, 7, 0}}), at(5, {{0, 2, 1}, {0, 3, 1}}), at(6, {{0, 4, 1}, {0, 5, 1}})};
  heads_outer[0].model_positions = {0, 1, 2, 3, 4, 5, 6, 7};
  const Finding f = cache_finding(heads_outer, p);
  BOOST_TEST(f.name == "kv_cache_heads_outer", f.name);
  BOOST_TEST(f.confidence == Confidence::high);
  BOOST_TEST(f.reproduced);
  // Whole heads of other rows, in no order it knows: the layout differs, at most medium.
  std::vector<CacheMismatch> other = {at(3, {{0, 1, 1}, {0, 5, 0}}), at(5, {{0, 2, 0}, {0, 6, 1}})};
  other[0].model_positions = {0, 1, 2, 3, 4, 5, 6, 7};
  const Finding g = cache_finding(other, p);
  BOOST_TEST(g.name == "kv_cache_layout_differs", g.name);
  BOOST_TEST(g.confidence == Confidence::medium);
  // Bytes of no row even head by head: stored otherwise.
  BOOST_TEST(cache_finding({at(3, {{-1, -1, -1}, {-1, -1, -1}})}, p).name == "stored_values_differ");
}

BOOST_AUTO_TEST_CASE(a_sink_counted_k_times_is_told_by_its_implied_logit) {
  // Rows whose weights leave out k e^sink of mass: the implied sink is sink + ln k.
  swa::AttnParams p;
  p.heads_q = 2;
  const float sinks[] = {0.3f, -0.6137f};
  p.sinks = sinks;
  auto rows_with = [&](double times) {
    std::vector<RecoveredRow> rows;
    for (int t = 0; t < 4; ++t) {
      RecoveredRow r;
      r.q_head = t % 2, r.token = t;
      r.scores = {0.5 + 0.1 * t, 1.2, -0.4};
      double z = times * std::exp(static_cast<double>(sinks[r.q_head]));
      for (double x : r.scores) z += std::exp(x);
      for (double x : r.scores) r.weights.push_back(std::exp(x) / z);
      rows.push_back(std::move(r));
    }
    return rows;
  };
  auto told = [&](const std::vector<RecoveredRow>& rows) {
    std::vector<const RecoveredRow*> ptrs;
    for (const RecoveredRow& r : rows) ptrs.push_back(&r);
    return sink_finding(ptrs, p);
  };
  const auto rows32 = rows_with(32), rows1 = rows_with(1), rows_off = rows_with(std::exp(1.7));
  const auto k32 = told(rows32);
  BOOST_TEST_REQUIRE(k32.has_value());
  BOOST_TEST(k32->name == "sink_counted_32_times", k32->name);
  BOOST_TEST(k32->confidence == Confidence::high);
  BOOST_TEST(!told(rows1).has_value());  // the spec's sink: nothing to tell
  const auto off = told(rows_off);       // sink + 1.7: no whole count (e^1.7 = 5.47)
  BOOST_TEST_REQUIRE(off.has_value());
  BOOST_TEST(off->name == "sink_wrong", off->name);
  // sink + 4: e^4 = 54.6, within the loose "near" of ln 55, but a third of the gap to ln 54 and ln 55.
  const auto rows_four = rows_with(std::exp(4.0));
  const auto four = told(rows_four);
  BOOST_TEST_REQUIRE(four.has_value());
  BOOST_TEST(four->name == "sink_wrong", four->name);
}

BOOST_AUTO_TEST_CASE(rows_of_pages_the_spec_never_holds_written_into_the_pool_s_last_page_are_named) {
  // Paged, chunks of 12, a window of 4 keys, pages of 2: a chunk's first rows lie in pages dead to
  // its next query (page-table entry -1) and are not stored. A DUT that writes them anyway, to page
  // -1 read as the pool's last, leaves them in another sequence's slots.
  using H = CacheMismatch::Held;
  swa::AttnParams p;
  p.mode = swa::RunMode::chunked_prefill;
  p.cache = swa::CachePolicy::paged;
  p.band = {3, 0};
  p.chunk = 12, p.page_size = 2, p.pool_pages = 9;
  Sequences two({24, 12});
  two.set(p);
  CacheMismatch a = slot(0, 14, 14, H::position, 1), b = slot(0, 15, 15, H::position, 2);
  a.held_sequence = b.held_sequence = 1;
  a.page = b.page = 8;
  a.call = b.call = "chunk 0";
  const Finding f = cache_finding({a, b}, p);
  BOOST_TEST(f.name == "unheld_page_rows_written", f.name);
  BOOST_TEST(contains(f.evidence, "the pool's last"));
  // The same slots holding rows the spec does store (position 10 of sequence 1 is in its last page):
  // another sequence's rows, not told why.
  a.held = 10, b.held = 11;
  BOOST_TEST(cache_finding({a, b}, p).name == "cross_sequence_write");
}
