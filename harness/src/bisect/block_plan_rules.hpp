#pragma once
// Block-plan rules for the key runs (key_runs.cpp). A kernel that tiles its queries by TQ rows and its
// keys by TK keys decides, per (query tile, key tile) pair and before it computes, whether the pair
// holds no visible key (skipped), only visible keys (taken whole, unmasked) or some (masked key by
// key): FlexAttention's block masks, splash attention's plans, FlashAttention's first and last key
// block per query block. With the spec's tests every row attends the spec's keys. One test read
// another way (the other edge of the key tile, the other row of the query tile, one off) skips a pair
// that holds visible keys, or takes whole a pair that holds hidden ones: the rows of those pairs
// attend another run. Each rule is one of the four tests read one other way, on one pair of tiles;
// or the spec's tests on a frame read another way: the call's query rows placed at another position
// in its key buffer (an offset of the call computed another way), or the plan's key tiles walked as
// tiles of another size (a plan counted in one block width, walked in another).
#include <cstdint>
#include <string>
#include <vector>

#include "key_run_rules.hpp"

namespace swa::harness::key_run_rules {

// The four tests of a pair, and the spec's reading of each, with lo(x) and hi(x) the first and last
// key row x sees and [ks, ke] the key tile, [qs, qe] the query tile:
//   skip_left    ke < lo(qs)   (the tile ends before the first row's first key)
//   skip_right   ks > hi(qe)   (it starts past the last row's last key)
//   whole_left   ks >= lo(qe)  (the last row sees its first key)
//   whole_right  ke <= hi(qs)  (the first row sees its last key)
enum class PlanTest { skip_left, skip_right, whole_left, whole_right };

// One reading of a test: which key-tile edge (first or last key) is compared with the first or last
// visible key of which query-tile row (first or last), plus delta.
struct PlanTestForm {
  bool key_last = false, query_last = false;
  int delta = 0;
  bool operator==(const PlanTestForm&) const = default;
};

// Where the plan places a call's rows among its keys. Key tiles start at position 0 (positions) or at
// the call's first key (its key buffer: the cache's keys it reads, then its own); the tests take a
// row at its position (the spec), or at another: its absolute position read as its index in the
// buffer, its index in the call read as its index in the buffer's last keys' place, or its index in
// the buffer read as its position.
enum class PlanFrame { positions, call_buffer };
enum class RowShift { none, position_as_buffer_index, call_index_as_buffer_index, buffer_index_as_position };

struct BlockPlan {
  int query_tile = 16, key_tile = 16;
  bool call_tiles = false;  // query tiles from the call's first row, its last tile cut at the call's end; else on positions
  PlanTest test = PlanTest::skip_left;
  PlanTestForm form;  // the test's reading; the other three are the spec's
  PlanFrame frame = PlanFrame::positions;
  RowShift shift = RowShift::none;
  int walk_tile = 0;          // > 0: the plan's key tile i is walked as keys [i * walk_tile, (i + 1) * walk_tile)
  bool always_masked = false;  // no pair taken whole: every walked tile masked key by key
};

PlanTestForm spec_form(PlanTest t);

// The run a row attends under the plan: {first, last}, first > last when it attends no key (and the
// hull of its pairs' keys when they are not one run: such a plan fits no measured row).
std::pair<std::int64_t, std::int64_t> plan_run(const AttnParams& p, const BlockPlan& plan, const RowPlace& r);

// Every plan with one test read otherwise, on each pair of `tiles`, on either frame; then the spec's
// tests with the rows shifted or the tiles walked in another width, masked or taken whole.
std::vector<BlockPlan> block_plans(const AttnParams& p, const std::vector<int>& tiles);

std::string plan_name(const BlockPlan& plan);
std::string plan_words(const AttnParams& p, const BlockPlan& plan);

}  // namespace swa::harness::key_run_rules
