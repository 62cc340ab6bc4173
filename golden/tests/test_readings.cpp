#define BOOST_TEST_MODULE golden_readings
// Readings of the spec: the spec's reading is the golden; every other reading bends the output of a
// case that has its feature, and the ones that should coincide do.
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "problem.hpp"
#include "swa/readings.hpp"

using namespace swa;

namespace {

constexpr double kSameAsGolden = 1e-12;

struct Case {
  const char* name;
  RunMode mode;
  CachePolicy cache;
  int chunk, steps;
  WindowBand band;
  float softcap;
  bool sinks;
  KvFormat kv;
  DType dtype;
};

const Case kCases[] = {
    {"prefill causal", RunMode::prefill, CachePolicy::linear, 0, 0, causal_band(), 0.f, false, KvFormat::dtype, DType::fp32},
    {"prefill window 7, sinks, cap", RunMode::prefill, CachePolicy::linear, 0, 0, {6, 0}, 4.f, true, KvFormat::dtype, DType::bf16},
    {"prefill two-sided", RunMode::prefill, CachePolicy::linear, 0, 0, {5, 3}, 0.f, false, KvFormat::dtype, DType::fp16},
    {"chunked ring-modulo", RunMode::chunked_prefill, CachePolicy::ring_modulo, 5, 0, {7, 0}, 0.f, true, KvFormat::dtype, DType::fp32},
    {"chunked ring-compact fp8", RunMode::chunked_prefill, CachePolicy::ring_compact, 11, 0, {7, 0}, 0.f, false, KvFormat::fp8_e4m3, DType::fp16},
    {"decode ring-modulo cap", RunMode::decode, CachePolicy::ring_modulo, 4, 9, {5, 0}, 3.f, true, KvFormat::dtype, DType::bf16},
    {"decode paged e5m2", RunMode::decode, CachePolicy::paged, 0, 6, {9, 0}, 0.f, false, KvFormat::fp8_e5m2, DType::fp32},
};

test::Problem build(const Case& c) {
  test::Problem pr = test::make_problem({37, 12, 23}, 4, 2, 16, c.band, c.dtype, 7, c.softcap > 0 ? 3.0 : 1.0);
  AttnParams& p = pr.params;
  p.softcap = c.softcap;
  if (c.sinks) test::add_sinks(pr, 11);
  p.mode = c.mode;
  p.cache = c.cache;
  p.chunk = c.chunk;
  p.decode_steps = c.steps;
  p.kv_format = c.kv;
  p.k_descale = 0.7373f;  // not a power of two, nor exact in bf16: the descale's rule and its type show
  p.v_descale = 1.4621f;
  if (c.cache == CachePolicy::paged) test::use_paged_cache(pr, 4, 3);
  return pr;
}

double worst(const std::vector<double>& a, const std::vector<double>& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::isfinite(a[i] - b[i]) ? std::abs(a[i] - b[i]) : INFINITY);
  return w;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_spec_s_reading_is_the_golden) {
  for (const Case& c : kCases) {
    test::Problem pr = build(c);
    BOOST_TEST(worst(golden::read_all(pr.params, {}), golden::run(pr.params).out) <= kSameAsGolden, c.name);
  }
}

BOOST_AUTO_TEST_CASE(fp8_round_nearest_even_is_the_golden_s_codec) {
  for (KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2})
    for (double m = 1e-9; m < 70000; m = m * 1.0137 + 1e-7)
      for (const double x : {m, -m}) {
      const double a = golden::fp8_round(f, golden::Fp8Rounding::nearest_even, true, x);
      BOOST_TEST(a == fp8_decode(f, fp8_encode(f, x)), kv_format_name(f) << " x=" << x);
        BOOST_TEST(std::abs(golden::fp8_round(f, golden::Fp8Rounding::toward_zero, true, x)) <= std::abs(x));
      }
}

// Each knob bends a case that has its feature (a reading that cannot change the output is no reading).
BOOST_AUTO_TEST_CASE(every_reading_bends_a_case_with_its_feature) {
  using golden::EdgeAnchor;
  using golden::EdgeRounding;
  using golden::Reading;
  struct Bend {
    const char* name;
    int case_index;
    Reading r;
  };
  auto with = [](auto set) {
    Reading r;
    set(r);
    return r;
  };
  const Bend bends[] = {
      {"scale", 0, with([](Reading& r) { r.scale = 0.2; })},
      {"softcap", 1, with([](Reading& r) { r.softcap = 2.0; })},
      {"cap before scale", 1, with([](Reading& r) { r.cap_before_scale = true; })},
      {"exp2", 0, with([](Reading& r) { r.exp2 = true; })},
      {"left + 1", 1, with([](Reading& r) { r.left_delta = 1; })},
      {"right - 1", 2, with([](Reading& r) { r.right_delta = -1; })},
      {"right ignored", 2, with([](Reading& r) { r.right_ignored = true; })},
      {"window ignored", 1, with([](Reading& r) { r.window_ignored = true; })},
      {"query + 1 in later chunks", 3, with([](Reading& r) { r.query_offset = 1, r.scope = golden::CallScope::later_chunks; })},
      {"query from call start", 3, with([](Reading& r) { r.query_from_call_start = true; })},
      {"kv head modulo", 0, with([](Reading& r) { r.kv_head = golden::KvHeadRule::modulo; })},
      {"sink kv head", 1, with([](Reading& r) { r.sink = golden::SinkRule::kv_head; })},
      {"sink capped", 1, with([](Reading& r) { r.sink = golden::SinkRule::capped; })},
      {"sink in numerator", 1, with([](Reading& r) { r.sink = golden::SinkRule::in_numerator; })},
      {"sink doubled in decode", 5, with([](Reading& r) { r.sink = golden::SinkRule::doubled_mass, r.scope = golden::CallScope::decode_steps; })},
      {"ring one slot short", 5, with([](Reading& r) { r.ring_capacity_delta = -1; })},
      {"ring read shifted", 5, with([](Reading& r) { r.ring_read_shift = 1; })},
      {"paged read shifted", 6, with([](Reading& r) { r.ring_read_shift = -1; })},
      {"lower edge from call start", 3, with([](Reading& r) { r.lower_edge = {EdgeAnchor::call_first_row}; })},
      {"lower edge per key tile", 1, with([](Reading& r) { r.lower_edge = {EdgeAnchor::row, 0, EdgeRounding::down_to_key_tile, 16}; })},
      {"future keys in query tile", 0, with([](Reading& r) { r.upper_edge = {EdgeAnchor::query_tile_last_row, 16}; })},
      {"decode reads before write", 5, with([](Reading& r) { r.decode_reads_before_write = true; })},
      {"newest cached key dropped", 3, with([](Reading& r) { r.cache_newest_dropped = 1; })},
      {"Q head-major", 0, with([](Reading& r) { r.q_head_major = true; })},
      {"K/V head-major", 3, with([](Reading& r) { r.kv_head_major = true; })},
      {"output head-major", 2, with([](Reading& r) { r.out_head_major = true; })},
      {"output head-major per call", 3, with([](Reading& r) { r.out_head_major = true, r.out_head_major_per_call = true; })},
      {"denominator causal", 1, with([](Reading& r) { r.denominator = golden::DenominatorScope::causal; })},
      {"tile rescale missing", 0, with([](Reading& r) { r.tile = 8, r.tile_rescale = golden::TileRescale::output_not_rescaled; })},
      {"split mean", 5, with([](Reading& r) { r.splits = 2, r.merge = golden::SplitMerge::mean; })},
      {"split sink per part", 5, with([](Reading& r) { r.splits = 2, r.merge = golden::SplitMerge::sink_per_part; })},
      {"round scores", 1, with([](Reading& r) { r.round_scores = true; })},
      {"fp8 toward zero", 4, with([](Reading& r) { r.fp8_rounding = golden::Fp8Rounding::toward_zero; })},
      {"fp8 other format", 4, with([](Reading& r) { r.fp8_format = KvFormat::fp8_e5m2; })},
      {"fp8 V with K's descale", 6, with([](Reading& r) { r.v_descale = golden::DescaleRule::other; })},
      {"fp8 chunk keys unquantised", 4, with([](Reading& r) { r.fp8_chunk_keys_unquantised = true; })},
      {"sink times ln 2", 1, with([](Reading& r) { r.sink_factor = std::log(2.0); })},
      {"row sum not rescaled", 0, with([](Reading& r) { r.tile = 8, r.tile_rescale = golden::TileRescale::row_sum_not_rescaled; })},
      {"split without row sums", 5, with([](Reading& r) { r.splits = 2, r.merge = golden::SplitMerge::without_row_sums; })},
      {"split in 3 even parts, sink per part", 5, with([](Reading& r) { r.splits = 3, r.splits_even = true, r.merge = golden::SplitMerge::sink_per_part; })},
      {"split in aligned parts of 4", 5, with([](Reading& r) { r.split_size = 4, r.merge = golden::SplitMerge::mean; })},
      {"chunk written before read", 3, with([](Reading& r) { r.chunk_written_before_read = true; })},
      {"decode reads the sequence's last row", 5, with([](Reading& r) { r.decode_row = golden::DecodeRow::sequence_last; })},
      {"lower edge rounded up to a key tile", 1, with([](Reading& r) { r.lower_edge = {EdgeAnchor::row, 0, EdgeRounding::up_to_key_tile, 4}; })},
      {"right keys stop at the query tile", 2, with([](Reading& r) { r.query_tile_upper_cap = 4; })},
      {"a call's own keys not causal", 3, with([](Reading& r) { r.upper_edge = {EdgeAnchor::call_last_row}; })},
      {"lower edge of a query tile's first row rounded up, masked", 1,
       with([](Reading& r) { r.lower_edge = {EdgeAnchor::query_tile_first_row, 8, EdgeRounding::up_to_key_tile, 4, true}; })},
      {"lower edge of a query tile's last row", 1, with([](Reading& r) { r.lower_edge = {EdgeAnchor::query_tile_last_row, 8}; })},
      {"diagonal key tile dropped", 0, with([](Reading& r) { r.upper_edge = {EdgeAnchor::row, 0, EdgeRounding::down_to_key_tile, 4, true}; })},
      {"future keys in the diagonal key tile", 0, with([](Reading& r) { r.upper_edge = {EdgeAnchor::row, 0, EdgeRounding::up_to_key_tile, 4}; })},
      {"upper edge of a query tile's first row", 0, with([](Reading& r) { r.upper_edge = {EdgeAnchor::query_tile_first_row, 8}; })},
      {"upper edge of a call-grid query tile's first row, up to a call-grid key tile, masked", 3,
       with([](Reading& r) {
         r.upper_edge = {EdgeAnchor::query_tile_first_row, 2, EdgeRounding::up_to_key_tile, 4, true, golden::TileGrid::call};
       })},
      {"two-sided window as a radius", 2, with([](Reading& r) { r.left_from_right = true; })},
      {"decode reads the previous row", 5, with([](Reading& r) { r.decode_row = golden::DecodeRow::previous; })},
      {"accumulator in fp16 between the cache's keys and the call's", 3,
       with([](Reading& r) { r.state_tile = -1, r.state_round_acc = true, r.round_type = DType::fp16; })},
      {"descales in bf16", 4, with([](Reading& r) { r.descale_type = DType::bf16, r.descale_rounded_on_encode = true; })},
      {"descales in bf16 on read", 4, with([](Reading& r) { r.descale_type = DType::bf16; })},
      {"K in fp16", 0, with([](Reading& r) { r.round_keys = true, r.round_type = DType::fp16; })},
      {"V in bf16", 0, with([](Reading& r) { r.round_values = true, r.round_type = DType::bf16; })},
  };
  for (const Bend& b : bends) {
    test::Problem pr = build(kCases[b.case_index]);
    BOOST_TEST(worst(golden::read_all(pr.params, b.r), golden::run(pr.params).out) > 1e-4, b.name);
  }
}

// The running max started at 0 changes nothing until every score of a row is far below 0: then
// its fp32 weights underflow (scores here up to about -150).
BOOST_AUTO_TEST_CASE(a_running_max_from_zero_bends_only_rows_of_very_negative_scores) {
  test::Problem pr = build(kCases[0]);
  golden::Reading steep, from_zero;
  steep.scale = from_zero.scale = pr.params.scale * 60;
  from_zero.max_from_zero = true;
  BOOST_TEST(worst(golden::read_all(pr.params, from_zero), golden::read_all(pr.params, steep)) > 1e-4);
  golden::Reading plain;
  plain.max_from_zero = true;
  BOOST_TEST(worst(golden::read_all(pr.params, plain), golden::run(pr.params).out) < 1e-5);
}

// One key more on the left: by position (a kernel that keeps the inputs) or through the ring's slot
// (which holds a newer position by then).
BOOST_AUTO_TEST_CASE(a_ring_read_through_its_slots_differs_from_a_read_by_position) {
  test::Problem pr = build(kCases[5]);
  golden::Reading by_position;
  by_position.left_delta = 1;
  golden::Reading by_slot = by_position;
  by_slot.ring_reads_slots = true;
  BOOST_TEST(worst(golden::read_all(pr.params, by_slot), golden::read_all(pr.params, by_position)) > 1e-4);
  golden::Reading spec_by_slot;  // inside the window the ring holds every key it should
  spec_by_slot.ring_reads_slots = true;
  BOOST_TEST(worst(golden::read_all(pr.params, spec_by_slot), golden::run(pr.params).out) <= kSameAsGolden);
}

// In prefill a call starts at row 0 and its first visible key at 0: the call's grids are the absolute
// ones. In chunks they differ where a chunk does not start on a tile.
BOOST_AUTO_TEST_CASE(an_edge_rule_on_the_call_s_grid_differs_only_where_calls_leave_the_absolute_grid) {
  using golden::EdgeAnchor;
  using golden::EdgeRounding;
  const golden::EdgeRule on_absolute{EdgeAnchor::query_tile_first_row, 4, EdgeRounding::up_to_key_tile, 4, true};
  golden::EdgeRule on_call = on_absolute;
  on_call.grid = golden::TileGrid::call;
  golden::Reading a, c;
  a.lower_edge = on_absolute;
  c.lower_edge = on_call;
  test::Problem prefill = build(kCases[1]);
  BOOST_TEST(worst(golden::read_all(prefill.params, a), golden::read_all(prefill.params, c)) <= kSameAsGolden);
  test::Problem chunked = build(kCases[3]);  // chunks of 5 rows, W 7: neither on a grid of 4
  BOOST_TEST(worst(golden::read_all(chunked.params, a), golden::read_all(chunked.params, c)) > 1e-4);
}

BOOST_AUTO_TEST_CASE(readings_that_are_one_computation_agree) {
  test::Problem pr = build(kCases[0]);
  golden::Reading base2, scaled;
  base2.exp2 = true;
  scaled.scale = pr.params.scale * std::log(2.0);
  BOOST_TEST(worst(golden::read_all(pr.params, base2), golden::read_all(pr.params, scaled)) <= 1e-12);
  // A split merged exactly is the spec.
  golden::Reading split;
  split.splits = 3;
  BOOST_TEST(worst(golden::read_all(pr.params, split), golden::run(pr.params).out) <= kSameAsGolden);
  golden::Reading even;
  even.splits = 4;
  even.splits_even = true;
  BOOST_TEST(worst(golden::read_all(pr.params, even), golden::run(pr.params).out) <= kSameAsGolden);
  golden::Reading aligned;
  aligned.split_size = 5;
  BOOST_TEST(worst(golden::read_all(pr.params, aligned), golden::run(pr.params).out) <= kSameAsGolden);
  // A reading scoped to decode steps leaves a prefill case alone.
  golden::Reading decode_only;
  decode_only.scale = 0.3;
  decode_only.scope = golden::CallScope::decode_steps;
  BOOST_TEST(worst(golden::read_all(pr.params, decode_only), golden::run(pr.params).out) <= kSameAsGolden);
}
