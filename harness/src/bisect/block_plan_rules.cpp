#include "block_plan_rules.hpp"

#include <algorithm>

namespace swa::harness::key_run_rules {
namespace {

constexpr PlanTest kTests[] = {PlanTest::skip_left, PlanTest::skip_right, PlanTest::whole_left, PlanTest::whole_right};

bool is_left(PlanTest t) { return t == PlanTest::skip_left || t == PlanTest::whole_left; }
bool is_skip(PlanTest t) { return t == PlanTest::skip_left || t == PlanTest::skip_right; }

struct Tiles {
  std::int64_t ks, ke, qs, qe;
};

// The test read `f`: the key tile's edge against the bound (lo or hi) of a query-tile row, plus delta.
bool evaluate(const AttnParams& p, const RowPlace& r, PlanTest t, const PlanTestForm& f, const Tiles& x) {
  const std::int64_t key = f.key_last ? x.ke : x.ks, row = f.query_last ? x.qe : x.qs;
  const std::int64_t bound = (is_left(t) ? spec_first_at(p, row) : spec_last_at(p, r, row)) + f.delta;
  switch (t) {
    case PlanTest::skip_left: return key < bound;
    case PlanTest::skip_right: return key > bound;
    case PlanTest::whole_left: return key >= bound;
    case PlanTest::whole_right: return key <= bound;
  }
  return false;
}

const char* test_words(PlanTest t) {
  switch (t) {
    case PlanTest::skip_left: return "the test that skips a key tile left of the window";
    case PlanTest::skip_right: return "the test that skips a key tile right of the window";
    case PlanTest::whole_left: return "the test that takes a key tile whole on the window's left side";
    case PlanTest::whole_right: return "the test that takes a key tile whole on its right (causal) side";
  }
  return "";
}

const char* test_name(PlanTest t) {
  switch (t) {
    case PlanTest::skip_left: return "skip_left";
    case PlanTest::skip_right: return "skip_right";
    case PlanTest::whole_left: return "whole_left";
    case PlanTest::whole_right: return "whole_right";
  }
  return "";
}

std::string formula(PlanTest t, const PlanTestForm& f) {
  static const char* ops[] = {"<", ">", ">=", "<="};
  std::string w = std::string("its ") + (f.key_last ? "last" : "first") + " key " + ops[static_cast<int>(t)] + " the " +
                  (is_left(t) ? "first" : "last") + " key the query tile's " + (f.query_last ? "last" : "first") + " row sees";
  if (f.delta) w += f.delta > 0 ? " + " + std::to_string(f.delta) : " - " + std::to_string(-f.delta);
  return w;
}

}  // namespace

PlanTestForm spec_form(PlanTest t) {
  switch (t) {
    case PlanTest::skip_left: return {true, false, 0};
    case PlanTest::skip_right: return {false, true, 0};
    case PlanTest::whole_left: return {false, true, 0};
    case PlanTest::whole_right: return {true, false, 0};
  }
  return {};
}

namespace {

// The call's first key: where its key buffer starts (0 outside a call of a chunked or decode run).
std::int64_t buffer_start(const AttnParams& p, const RowPlace& r) { return p.mode == RunMode::prefill ? 0 : spec_first_at(p, r.c0); }

// How far the plan moves a row: the position its tests take the row at, minus its own.
std::int64_t row_shift(const AttnParams& p, const BlockPlan& plan, const RowPlace& r) {
  if (plan.shift == RowShift::none) return 0;
  const std::int64_t start = buffer_start(p, r);
  switch (plan.shift) {
    case RowShift::none: return 0;
    case RowShift::position_as_buffer_index: return start;
    case RowShift::call_index_as_buffer_index: return start - r.c0;
    case RowShift::buffer_index_as_position: return -start;
  }
  return 0;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> plan_run(const AttnParams& p, const BlockPlan& plan, const RowPlace& r) {
  const std::int64_t origin = plan.call_tiles ? r.c0 : 0;
  const std::int64_t shift = row_shift(p, plan, r);
  Tiles x{0, 0, origin + floor_to(r.t - origin, plan.query_tile), 0};
  x.qe = x.qs + plan.query_tile - 1;
  if (plan.call_tiles) x.qe = std::min(x.qe, r.c1);
  x.qs += shift, x.qe += shift;  // the rows the tests take the tile's rows at
  const std::int64_t spec_first = spec_first_at(p, r.t), spec_last = spec_last_at(p, r, r.t);
  auto test = [&](PlanTest t) { return evaluate(p, r, t, t == plan.test ? plan.form : spec_form(t), x); };
  const std::int64_t key0 = plan.frame == PlanFrame::call_buffer ? buffer_start(p, r) : 0;
  const std::int64_t walk = plan.walk_tile > 0 ? plan.walk_tile : plan.key_tile;
  std::int64_t first = 1, last = 0;
  for (std::int64_t i = 0; key0 + i * plan.key_tile <= r.last_key; ++i) {
    x.ks = key0 + i * plan.key_tile;
    x.ke = x.ks + plan.key_tile - 1;
    if (test(PlanTest::skip_left) || test(PlanTest::skip_right)) continue;
    const bool whole = !plan.always_masked && test(PlanTest::whole_left) && test(PlanTest::whole_right);
    const std::int64_t ws = key0 + i * walk, we = ws + walk - 1;  // the keys walked for plan tile i
    const std::int64_t a = whole ? ws : std::max(ws, spec_first);
    const std::int64_t z = std::min({we, r.last_key, whole ? we : spec_last});
    if (a > z) continue;
    if (first > last) first = a, last = z;
    else first = std::min(first, a), last = std::max(last, z);
  }
  return {first, last};
}

std::vector<BlockPlan> block_plans(const AttnParams& p, const std::vector<int>& tiles) {
  std::vector<BlockPlan> plans;
  std::vector<PlanFrame> frames = {PlanFrame::positions};
  if (p.mode != RunMode::prefill) frames.push_back(PlanFrame::call_buffer);  // in prefill the buffer starts at 0
  for (PlanTest t : kTests) {
    if (is_left(t) && p.band.left < 0) continue;  // no left edge: the left tests never bite
    for (int key_last = 0; key_last < 2; ++key_last)
      for (int query_last = 0; query_last < 2; ++query_last)
        for (int delta = -1; delta <= 1; ++delta) {
          const PlanTestForm f{key_last == 1, query_last == 1, delta};
          if (f == spec_form(t)) continue;
          for (PlanFrame frame : frames)
            for (auto tq = tiles.rbegin(); tq != tiles.rend(); ++tq)  // the largest tiles that fit first
              for (auto tk = tiles.rbegin(); tk != tiles.rend(); ++tk)
                for (const bool call_tiles : {false, true})
                  if (!call_tiles || p.mode != RunMode::prefill) plans.push_back({*tq, *tk, call_tiles, t, f, frame});
        }
  }
  // The spec's tests on another frame: rows shifted (calls after a run's first only), or tiles walked
  // in another width than the plan counts in.
  for (const bool masked : {true, false})
    for (PlanFrame frame : frames)
      for (auto tq = tiles.rbegin(); tq != tiles.rend(); ++tq)
        for (auto tk = tiles.rbegin(); tk != tiles.rend(); ++tk)
          for (const bool call_tiles : {false, true}) {
            if (call_tiles && p.mode == RunMode::prefill) continue;
            BlockPlan spec{*tq, *tk, call_tiles, PlanTest::skip_left, spec_form(PlanTest::skip_left), frame};
            spec.always_masked = masked;
            if (p.mode != RunMode::prefill)
              for (RowShift s : {RowShift::position_as_buffer_index, RowShift::call_index_as_buffer_index, RowShift::buffer_index_as_position}) {
                BlockPlan shifted = spec;
                shifted.shift = s;
                plans.push_back(shifted);
              }
            for (int walk : tiles)
              if (walk != *tk) {
                BlockPlan walked = spec;
                walked.walk_tile = walk;
                plans.push_back(walked);
              }
          }
  return plans;
}

std::string plan_name(const BlockPlan& plan) {
  const PlanTestForm spec = spec_form(plan.test);
  std::string n = "block_plan";
  if (plan.form == spec) {
    if (plan.shift == RowShift::position_as_buffer_index) n += "_rows_at_their_positions_in_the_call_buffer";
    if (plan.shift == RowShift::call_index_as_buffer_index) n += "_rows_at_their_call_index_in_the_call_buffer";
    if (plan.shift == RowShift::buffer_index_as_position) n += "_rows_at_their_buffer_index_as_positions";
    if (plan.walk_tile > 0) n += "_counted_in_" + std::to_string(plan.key_tile) + "_key_tiles_walked_in_" + std::to_string(plan.walk_tile);
  } else {
    n += std::string("_") + test_name(plan.test) + "_test";
    if (plan.form.key_last != spec.key_last) n += plan.form.key_last ? "_on_key_tile_last_key" : "_on_key_tile_first_key";
    if (plan.form.query_last != spec.query_last) n += plan.form.query_last ? "_of_query_tile_last_row" : "_of_query_tile_first_row";
    if (plan.form.delta) n += plan.form.delta > 0 ? "_plus_1" : "_minus_1";
  }
  n += "_" + std::to_string(plan.query_tile) + "x" + std::to_string(plan.key_tile) + (plan.call_tiles ? "_of_call" : "");
  if (plan.frame == PlanFrame::call_buffer) n += "_key_tiles_from_call_first_key";
  if (plan.always_masked && plan.form == spec) n += "_masked";
  return n;
}

std::string plan_words(const AttnParams& p, const BlockPlan& plan) {
  (void)p;
  const std::string tiles = "a block plan over " + std::to_string(plan.query_tile) + "-row query tiles" +
                            (plan.call_tiles ? " (counted from the call's first row)" : " (on positions)") + " and " +
                            std::to_string(plan.key_tile) + "-key tiles" +
                            (plan.frame == PlanFrame::call_buffer ? " (from the call's first key: its key buffer)" : "") +
                            " decides each pair before it computes";
  const std::string masked = plan.always_masked ? ", every walked tile masked key by key" : "";
  if (plan.form == spec_form(plan.test)) {
    if (plan.walk_tile > 0)
      return tiles + ", with the spec's tests, and walks plan tile i as keys [i*" + std::to_string(plan.walk_tile) + ", (i+1)*" +
             std::to_string(plan.walk_tile) + "): the plan counts in " + std::to_string(plan.key_tile) + "-key blocks, the walk in " +
             std::to_string(plan.walk_tile) + masked + " (keys outside the walked tiles dropped)";
    const char* shift = plan.shift == RowShift::position_as_buffer_index
                            ? "takes each row of a call at its absolute position used as its index in the call's key buffer "
                              "(the buffer's first key, not position 0, is index 0: the rows placed later by that many keys)"
                        : plan.shift == RowShift::call_index_as_buffer_index
                            ? "takes each row of a call at its index in the call used as its index in the call's key buffer "
                              "(the call's rows placed at the buffer's start, not after its cached keys)"
                            : "takes each row of a call at its index in the call's key buffer used as its position "
                              "(the rows placed earlier by the buffer's first key)";
    return tiles + ", with the spec's tests, but " + shift + masked +
           ": a row's pairs are picked for another position, its keys outside them dropped (no key at all when none is left)";
  }
  return tiles + ", and " + test_words(plan.test) + " reads `" + formula(plan.test, plan.form) + "` where the spec's is `" +
         formula(plan.test, spec_form(plan.test)) + "`: " +
         (is_skip(plan.test) ? "a pair that holds visible keys is skipped (its keys dropped)"
                             : "a pair that holds hidden keys is taken whole, unmasked (its hidden keys attended)");
}

}  // namespace swa::harness::key_run_rules
