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

std::pair<std::int64_t, std::int64_t> plan_run(const AttnParams& p, const BlockPlan& plan, const RowPlace& r) {
  const std::int64_t origin = plan.call_tiles ? r.c0 : 0;
  Tiles x{0, 0, origin + floor_to(r.t - origin, plan.query_tile), 0};
  x.qe = x.qs + plan.query_tile - 1;
  if (plan.call_tiles) x.qe = std::min(x.qe, r.c1);
  const std::int64_t spec_first = spec_first_at(p, r.t), spec_last = spec_last_at(p, r, r.t);
  auto test = [&](PlanTest t) { return evaluate(p, r, t, t == plan.test ? plan.form : spec_form(t), x); };
  std::int64_t first = 1, last = 0;
  for (x.ks = 0; x.ks <= r.last_key; x.ks += plan.key_tile) {
    x.ke = x.ks + plan.key_tile - 1;
    if (test(PlanTest::skip_left) || test(PlanTest::skip_right)) continue;
    const bool whole = test(PlanTest::whole_left) && test(PlanTest::whole_right);
    const std::int64_t a = whole ? x.ks : std::max(x.ks, spec_first);
    const std::int64_t z = std::min({x.ke, r.last_key, whole ? x.ke : spec_last});
    if (a > z) continue;
    if (first > last) first = a, last = z;
    else first = std::min(first, a), last = std::max(last, z);
  }
  return {first, last};
}

std::vector<BlockPlan> block_plans(const AttnParams& p, const std::vector<int>& tiles) {
  std::vector<BlockPlan> plans;
  for (PlanTest t : kTests) {
    if (is_left(t) && p.band.left < 0) continue;  // no left edge: the left tests never bite
    for (int key_last = 0; key_last < 2; ++key_last)
      for (int query_last = 0; query_last < 2; ++query_last)
        for (int delta = -1; delta <= 1; ++delta) {
          const PlanTestForm f{key_last == 1, query_last == 1, delta};
          if (f == spec_form(t)) continue;
          for (auto tq = tiles.rbegin(); tq != tiles.rend(); ++tq)  // the largest tiles that fit first
            for (auto tk = tiles.rbegin(); tk != tiles.rend(); ++tk)
              for (const bool call_tiles : {false, true})
                if (!call_tiles || p.mode != RunMode::prefill) plans.push_back({*tq, *tk, call_tiles, t, f});
        }
  }
  return plans;
}

std::string plan_name(const BlockPlan& plan) {
  const PlanTestForm spec = spec_form(plan.test);
  std::string n = std::string("block_plan_") + test_name(plan.test) + "_test";
  if (plan.form.key_last != spec.key_last) n += plan.form.key_last ? "_on_key_tile_last_key" : "_on_key_tile_first_key";
  if (plan.form.query_last != spec.query_last) n += plan.form.query_last ? "_of_query_tile_last_row" : "_of_query_tile_first_row";
  if (plan.form.delta) n += plan.form.delta > 0 ? "_plus_1" : "_minus_1";
  return n + "_" + std::to_string(plan.query_tile) + "x" + std::to_string(plan.key_tile) + (plan.call_tiles ? "_of_call" : "");
}

std::string plan_words(const AttnParams& p, const BlockPlan& plan) {
  (void)p;
  return "a block plan over " + std::to_string(plan.query_tile) + "-row query tiles" +
         (plan.call_tiles ? " (counted from the call's first row)" : " (on positions)") + " and " +
         std::to_string(plan.key_tile) + "-key tiles decides each pair before it computes, and " + test_words(plan.test) +
         " reads `" + formula(plan.test, plan.form) + "` where the spec's is `" + formula(plan.test, spec_form(plan.test)) +
         "`: " +
         (is_skip(plan.test) ? "a pair that holds visible keys is skipped (its keys dropped)"
                             : "a pair that holds hidden keys is taken whole, unmasked (its hidden keys attended)");
}

}  // namespace swa::harness::key_run_rules
