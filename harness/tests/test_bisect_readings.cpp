// Bisect's search over readings of the spec, on outputs made by a hidden reading: the search names
// the reading that made them, fits a continuous one, reproduces nothing that no reading made, and
// the confidence rule reads its numbers. The README's table is the code's table.
#define BOOST_TEST_MODULE harness_bisect_readings
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "../src/bisect/finding.hpp"
#include "../src/bisect/judgement.hpp"
#include "../src/bisect/placement.hpp"
#include "../src/bisect/readings_search.hpp"
#include "swa/dtype.hpp"
#include "swa/golden.hpp"

using namespace swa;
using namespace swa::harness;

namespace swa::harness {
std::ostream& operator<<(std::ostream& o, Confidence c) { return o << confidence_name(c); }
}  // namespace swa::harness

namespace {

// A packed problem of fp32 inputs with owned buffers: 3 sequences, GQA 4/2, head size 32.
struct Case {
  std::vector<std::int32_t> lens = {41, 14, 30};
  std::vector<std::int64_t> offsets;
  std::vector<float> q, k, v, sinks;
  AttnParams p;

  explicit Case(std::uint64_t seed) {
    offsets.assign(lens.size() + 1, 0);
    for (std::size_t b = 0; b < lens.size(); ++b) offsets[b + 1] = offsets[b] + lens[b];
    const std::int64_t n = offsets.back();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    auto fill = [&](std::vector<float>& x, std::int64_t count) {
      x.resize(count);
      for (float& e : x) e = normal(rng);
    };
    fill(q, n * 4 * 32);
    fill(k, n * 2 * 32);
    fill(v, n * 2 * 32);
    fill(sinks, 4);
    p.q = q.data(), p.k = k.data(), p.v = v.data();
    p.dtype = DType::fp32;
    p.batch = 3, p.seq_lens = lens.data(), p.seq_offsets = offsets.data();
    p.heads_q = 4, p.heads_kv = 2, p.head_size = 32;
    p.band = {10, 0};  // a window of 11 keys: not a tile multiple
    p.scale = default_scale(32) * 1.9f;  // scores large enough that a cap bites
    p.softcap = 4.3f;
    p.sinks = sinks.data();
    set_contiguous_strides(p);
  }
  void decode(int steps) {
    p.mode = RunMode::decode;
    p.cache = CachePolicy::ring_modulo;
    p.chunk = 7;
    p.decode_steps = steps;
  }
};

std::vector<double> limits(const AttnParams& p, double limit) {
  return std::vector<double>(static_cast<std::size_t>(total_tokens(p)), limit);
}

// The DUT: the reading's output, rounded to fp32 as a kernel's output is.
std::vector<double> dut_output(const AttnParams& p, const golden::Reading& r) {
  std::vector<double> out = golden::read_all(p, r);
  for (double& x : out) x = static_cast<float>(x);
  return out;
}

ReadingSearch search(const Case& c, const std::vector<double>& out) {
  return search_readings(c.p, out, golden::run(c.p).out, limits(c.p, 2e-6), [](const std::string&) {});
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_hidden_discrete_reading_is_named_by_reproducing_it) {
  struct Hidden {
    const char* name;
    bool decode;
    golden::Reading r;
  };
  auto with = [](auto set) {
    golden::Reading r;
    set(r);
    return r;
  };
  const Hidden hidden[] = {
      {"sink_wrong_head", false, with([](golden::Reading& r) { r.sink = golden::SinkRule::kv_head; })},
      {"sink_capped", false, with([](golden::Reading& r) { r.sink = golden::SinkRule::capped; })},
      {"window_plus_one", false, with([](golden::Reading& r) { r.left_delta = 1; })},
      {"gqa_modulo_mapping", false, with([](golden::Reading& r) { r.kv_head = golden::KvHeadRule::modulo; })},
      {"softcap_ignored", true, with([](golden::Reading& r) { r.softcap = 0, r.scope = golden::CallScope::prompt_calls; })},
      {"ring_one_slot_short", true, with([](golden::Reading& r) { r.ring_capacity_delta = -1; })},
      {"split_kv_merge_wrong", true,
       with([](golden::Reading& r) { r.splits = 2, r.merge = golden::SplitMerge::max_not_shared, r.scope = golden::CallScope::decode_steps; })},
      {"split_kv_remainder_dropped", true,
       with([](golden::Reading& r) { r.splits = 4, r.splits_drop_remainder = true, r.scope = golden::CallScope::decode_steps; })},
      {"out_heads_permuted", true,
       with([](golden::Reading& r) { r.out_heads = golden::HeadMap::group_transposed, r.scope = golden::CallScope::decode_steps; })},
      {"q_heads_permuted", false, with([](golden::Reading& r) { r.q_heads = golden::HeadMap::reversed; })},
      {"tile_rescale_inverted", false, with([](golden::Reading& r) { r.tile = 16, r.tile_rescale = golden::TileRescale::inverted; })},
      {"chunk_kv_pointer_not_advanced", true, with([](golden::Reading& r) { r.kv_rows_from_call_start = true; })},
      {"sink_rounded_to_fp16", false, with([](golden::Reading& r) { r.round_sink = true, r.round_type = DType::fp16; })},
      {"softcap_twice", true, with([](golden::Reading& r) { r.cap_twice = true, r.scope = golden::CallScope::decode_steps; })},
      {"running_row_sum_in_fp16_per_48_key_tile", false,
       with([](golden::Reading& r) { r.state_tile = 48, r.state_newest_first = true, r.state_round_sum = true, r.round_type = DType::fp16; })},
      {"query_position_from_call_start", true,
       with([](golden::Reading& r) { r.query_from_call_start = true, r.keys_from_call_window = true; })},
      {"running_accumulator_in_fp16_between_stages", true,
       with([](golden::Reading& r) { r.state_tile = -1, r.state_round_acc = true, r.round_type = DType::fp16; })},
      {"ring_read_in_slot_order", true, with([](golden::Reading& r) { r.ring_read_in_slot_order = true; })},
  };
  for (const Hidden& h : hidden) {
    Case c(5);
    if (h.decode) c.decode(9);
    const ReadingSearch s = search(c, dut_output(c.p, h.r));
    BOOST_TEST_REQUIRE(!s.reproducing.empty(), h.name << ": closest " << (s.closest ? s.closest->name() : "-"));
    BOOST_TEST(s.reproducing.front().name() == h.name);
    BOOST_TEST((s.reproducing.front().reading.scope == h.r.scope), h.name);
  }
}

BOOST_AUTO_TEST_CASE(a_padded_key_tile_is_named_where_a_two_sided_band_reaches_it) {
  Case c(8);
  c.p.band = {10, 5};  // rows within 5 of a sequence's end reach past its last key
  golden::Reading r;
  r.padded_key_tile = 16;
  const ReadingSearch s = search(c, dut_output(c.p, r));
  BOOST_TEST_REQUIRE(!s.reproducing.empty(), "closest " << (s.closest ? s.closest->name() : "-"));
  BOOST_TEST(s.reproducing.front().name() == "padded_keys_attended");
  BOOST_TEST(s.reproducing.front().words().find("16-key tile") != std::string::npos, s.reproducing.front().words());
}

BOOST_AUTO_TEST_CASE(scores_over_the_first_dims_only_are_named) {
  // The DUT made without the readings: the golden of Q with its dims past 16 zeroed (head size 32).
  Case c(12);
  const std::vector<double> ref = golden::run(c.p).out;
  const std::vector<float> q = c.q;
  for (std::size_t i = 0; i < c.q.size(); ++i)
    if (i % 32 >= 16) c.q[i] = 0;
  const std::vector<double> out = golden::run(c.p).out;
  c.q = q;  // the search reads the DUT's own inputs
  const ReadingSearch s = search_readings(c.p, out, ref, limits(c.p, 2e-6), [](const std::string&) {});
  BOOST_TEST_REQUIRE(!s.reproducing.empty(), "closest " << (s.closest ? s.closest->name() : "-"));
  BOOST_TEST(s.reproducing.front().name() == "scores_over_first_16_dims");
}

BOOST_AUTO_TEST_CASE(an_fp8_clamp_at_another_type_s_largest_is_named_and_a_look_alike_held_to_its_reading) {
  Case c(11);
  c.p.kv_format = KvFormat::fp8_e5m2;
  c.p.k_descale = 1 / 293.7f, c.p.v_descale = 1 / 311.3f;  // not powers of two; |x / descale| passes 448
  const std::vector<double> ref = golden::run(c.p).out;
  // The DUT made without the readings: the golden of K/V clamped at 448 descales first.
  const std::vector<float> k = c.k, v = c.v;
  for (float& x : c.k) x = std::clamp(x, -448 * c.p.k_descale, 448 * c.p.k_descale);
  for (float& x : c.v) x = std::clamp(x, -448 * c.p.v_descale, 448 * c.p.v_descale);
  const std::vector<double> out = golden::run(c.p).out;
  c.k = k, c.v = v;  // the search reads the DUT's own inputs
  const ReadingSearch s = search_readings(c.p, out, ref, limits(c.p, 2e-6), [](const std::string&) {});
  BOOST_TEST_REQUIRE(!s.reproducing.empty(), "closest " << (s.closest ? s.closest->name() : "-"));
  BOOST_TEST(s.reproducing.front().name() == "fp8_clamped_at_448");
  // The other format loses the large values too; the variant's reading, row by row, does not reproduce.
  Finding look_alike{"fp8_other_format", FindingSource::variant, {}, Confidence::high, ""};
  BOOST_TEST(hold_variant_to_its_reading(look_alike, "fp8_other_format", c.p, out, ref, limits(c.p, 2e-6)));
  BOOST_TEST(look_alike.confidence == Confidence::medium);
  BOOST_TEST(look_alike.why.find("failing rows over their limit") != std::string::npos, look_alike.why);
  // Where the kernel does quantise to the other format, the variant stands.
  golden::Reading other;
  other.fp8_format = KvFormat::fp8_e4m3;
  Finding right{"fp8_other_format", FindingSource::variant, {}, Confidence::high, ""};
  BOOST_TEST(!hold_variant_to_its_reading(right, "fp8_other_format", c.p, dut_output(c.p, other), ref, limits(c.p, 2e-6)));
  BOOST_TEST(right.confidence == Confidence::high);
}

// Descales held in bf16 by a kernel written without the readings: the golden run with its descales
// rounded to bf16 (7.1e-3 and 3.9e-3: not powers of two, so the rounding moves them).
BOOST_AUTO_TEST_CASE(descales_held_in_a_half_type_are_named) {
  Case c(12);
  c.p.kv_format = KvFormat::fp8_e4m3;
  c.p.k_descale = 1 / 141.3f, c.p.v_descale = 1 / 257.9f;
  const std::vector<double> ref = golden::run(c.p).out;
  AttnParams held = c.p;
  held.k_descale = round_to(DType::bf16, c.p.k_descale), held.v_descale = round_to(DType::bf16, c.p.v_descale);
  BOOST_TEST_REQUIRE(held.k_descale != c.p.k_descale);
  std::vector<double> out = golden::run(held).out;
  for (double& x : out) x = static_cast<float>(x);
  const ReadingSearch s = search_readings(c.p, out, ref, limits(c.p, 2e-6), [](const std::string&) {});
  BOOST_TEST_REQUIRE(!s.reproducing.empty(), "closest " << (s.closest ? s.closest->name() : "-"));
  BOOST_TEST(s.reproducing.front().name() == "fp8_descales_in_bf16");
}

// A reading that rounds an intermediate (here the state spilled to fp16 between a call's stages) is
// computed in fp64 and the DUT's in fp32: a value on a rounding boundary rounds apart. One row off by
// about one fp16 unit still reproduces, and says so; a row off by ten does not.
BOOST_AUTO_TEST_CASE(a_row_one_rounding_apart_is_allowed_to_a_rounding_reading_only) {
  Case c(5);
  c.decode(9);
  golden::Reading spill;
  spill.state_tile = -1, spill.state_round_acc = true, spill.round_type = DType::fp16;
  const std::vector<double> ref = golden::run(c.p).out;
  std::vector<double> out = dut_output(c.p, spill);
  const std::size_t row = static_cast<std::size_t>(c.offsets[1] - 3) * c.p.heads_q * c.p.head_size;  // a decode row
  double largest = 0;
  for (const double x : out) largest = std::max(largest, std::abs(x));
  auto trial_with = [&](double units) {
    std::vector<double> o = out;
    o[row] += units * std::ldexp(1.0, -11) * std::abs(o[row]);
    ReadingTrial t;
    t.reading = spill;
    return check_reading(c.p, t, o, ref, limits(c.p, 2e-6));
  };
  const ReadingTrial near = trial_with(0.9);
  BOOST_TEST(near.reproduces);
  BOOST_TEST(near.boundary_rows == 1);
  BOOST_TEST(!trial_with(10 * largest / std::abs(out[row])).reproduces);
  ReadingTrial spec;  // the spec rounds nothing: no row is allowed off
  std::vector<double> g = ref;
  for (double& x : g) x = static_cast<float>(x);
  g[row] += 0.9 * std::ldexp(1.0, -11) * std::abs(g[row]) + 1e-5;
  spec.reading.left_delta = 0;
  BOOST_TEST(!check_reading(c.p, spec, g, ref, limits(c.p, 2e-6)).reproduces);
}

// K staged in fp16 by a kernel written without the readings (the golden on K rounded to fp16) in
// an fp32 case: the keys' rounding is named.
BOOST_AUTO_TEST_CASE(keys_held_in_a_half_type_are_named) {
  Case c(13);
  const std::vector<double> ref = golden::run(c.p).out;
  const std::vector<float> k = c.k;
  for (float& x : c.k) x = round_to(DType::fp16, x);
  std::vector<double> out = golden::run(c.p).out;
  for (double& x : out) x = static_cast<float>(x);
  c.k = k;
  const ReadingSearch s = search_readings(c.p, out, ref, limits(c.p, 2e-6), [](const std::string&) {});
  BOOST_TEST_REQUIRE(!s.reproducing.empty(), "closest " << (s.closest ? s.closest->name() : "-"));
  BOOST_TEST(s.reproducing.front().name() == "keys_rounded_to_fp16");
}

BOOST_AUTO_TEST_CASE(a_continuous_reading_is_fitted_to_its_value) {
  Case c(6);
  golden::Reading r;
  r.softcap = 3.47;
  const ReadingSearch s = search(c, dut_output(c.p, r));
  BOOST_TEST_REQUIRE(!s.reproducing.empty());
  BOOST_TEST(s.reproducing.front().name() == "softcap_value_differs");
  BOOST_TEST(s.reproducing.front().words().find("at 3.47 instead of 4.3") != std::string::npos, s.reproducing.front().words());
}

BOOST_AUTO_TEST_CASE(an_output_no_reading_made_is_not_reproduced) {
  Case c(7);
  std::vector<double> out = dut_output(c.p, {});
  // A kernel whose third sequence reads V one row late: in no table.
  const std::size_t row = static_cast<std::size_t>(c.p.heads_q) * c.p.head_size;
  for (std::int64_t t = c.offsets[2] + 12; t < c.offsets[3]; ++t)
    for (std::size_t i = 0; i < row; ++i) out[t * row + i] = 0.5 * out[t * row + i] + 0.25;
  const ReadingSearch s = search(c, out);
  BOOST_TEST(s.reproducing.empty(), (s.reproducing.empty() ? "" : s.reproducing.front().name()));
  BOOST_TEST_REQUIRE(s.closest.has_value());
  BOOST_TEST(s.closest->failing_within < s.closest->failing);
  // The golden's own output has no failing row: nothing to search.
  BOOST_TEST(search(c, dut_output(c.p, {})).evaluated == 0);
}

BOOST_AUTO_TEST_CASE(rows_written_to_the_wrong_places_are_placed) {
  // Sequence 2's rows of heads 0 and 3 swapped: each failing row is exactly one other row's output.
  Case c(10);
  const std::vector<double> ref = golden::run(c.p).out;
  std::vector<double> out = dut_output(c.p, {});
  const std::size_t d = static_cast<std::size_t>(c.p.head_size), row = static_cast<std::size_t>(c.p.heads_q) * d;
  for (std::int64_t t = c.offsets[2]; t < c.offsets[3]; ++t)
    for (std::size_t k = 0; k < d; ++k) std::swap(out[t * row + k], out[t * row + 3 * d + k]);
  const auto placed = fit_output_placement(c.p, out, ref, limits(c.p, 2e-6));
  BOOST_TEST_REQUIRE(placed.has_value());
  BOOST_TEST(placed->placed == placed->failing);
  BOOST_TEST(placed->failing == 2 * c.lens[2]);
  BOOST_TEST(placed->patterns.front().find("holding head") != std::string::npos, placed->patterns.front());
  const Finding f = placement_finding(*placed);
  BOOST_TEST(f.name == "output_rows_misplaced");
  BOOST_TEST(f.confidence == Confidence::high);
  // Rows that are no row's output are not placed.
  for (std::int64_t t = c.offsets[2]; t < c.offsets[3]; ++t)
    for (std::size_t k = 0; k < row; ++k) out[t * row + k] = 0.5 * out[t * row + k] + 0.25;
  BOOST_TEST(!fit_output_placement(c.p, out, ref, limits(c.p, 2e-6)).has_value());
}

BOOST_AUTO_TEST_CASE(rows_that_fail_by_the_dut_s_storage_noise_alone_are_not_searched) {
  // Limits far below fp32's rounding: the golden rounded to fp32 fails every row, by one unit of its
  // storage; any reading near the golden would "reproduce" that, so none is searched.
  Case c(9);
  const ReadingSearch s = search_readings(c.p, dut_output(c.p, {}), golden::run(c.p).out, limits(c.p, 1e-12),
                                          [](const std::string&) {});
  BOOST_TEST(s.spec_within_noise);
  BOOST_TEST(s.reproducing.empty(), (s.reproducing.empty() ? "" : s.reproducing.front().name()));
}

BOOST_AUTO_TEST_CASE(confidence_is_read_from_its_numbers) {
  ConfidenceEvidence e;
  e.failing_rows = 48;
  e.reproduced_rows = 48;
  BOOST_TEST(confidence_from(e).confidence == Confidence::high);
  BOOST_TEST(confidence_from(e).why.find("48") != std::string::npos);
  e.contradictions = 1;
  BOOST_TEST(confidence_from(e).confidence == Confidence::medium);
  e = {};
  e.failing_rows = 48, e.consistent_rows = 2;  // "high" once, beside "2 of the 48 fitted rows"
  BOOST_TEST(confidence_from(e).confidence == Confidence::abstained);
  BOOST_TEST(confidence_from(e).why.find("2 of the 48") != std::string::npos);
  e.consistent_rows = 40;
  BOOST_TEST(confidence_from(e).confidence == Confidence::medium);
  e.contradictions = 1;
  BOOST_TEST(confidence_from(e).confidence == Confidence::abstained);
}

BOOST_AUTO_TEST_CASE(the_readme_s_table_is_the_code_s) {
  std::ifstream f(SWA_BISECT_README);
  std::stringstream text;
  text << f.rdbuf();
  BOOST_TEST(text.str().find(reading_table_markdown()) != std::string::npos,
             "harness/src/bisect/README.md must hold the table exactly as swa-harness prints it:\n" << reading_table_markdown());
}

BOOST_AUTO_TEST_CASE(a_normalised_online_update_that_forgets_the_old_row_sum_is_named) {
  // Written here, apart from the golden's readings: a FlashAttention-1 style kernel that keeps its
  // output normalised after every 16-key tile on positions, the sink seeding its state, and whose
  // update leaves out the old row sum: o = (e^(m_old - m_new) o + P.V) / l_new.
  Case c(9);
  const AttnParams& p = c.p;
  std::vector<double> out(static_cast<std::size_t>(total_tokens(p) * p.heads_q * p.head_size));
  const int d = p.head_size, group = p.heads_q / p.heads_kv;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        const float* q = &c.q[static_cast<std::size_t>((p.seq_offsets[b] + t) * p.heads_q + h) * d];
        double m = p.sinks[h], l = 1;
        std::vector<double> o(d, 0.0);
        const std::int64_t first = std::max<std::int64_t>(0, t - p.band.left);
        for (std::int64_t tile = first / 16 * 16; tile <= t; tile += 16) {
          std::vector<std::pair<double, const float*>> keys;  // score, V row
          for (std::int64_t j = std::max(first, tile); j <= std::min(t, tile + 15); ++j) {
            const std::size_t kv = static_cast<std::size_t>((p.seq_offsets[b] + j) * p.heads_kv + h / group) * d;
            double dot = 0;
            for (int x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * c.k[kv + x];
            keys.push_back({p.softcap * std::tanh(p.scale * dot / p.softcap), &c.v[kv]});
          }
          double m_new = m;
          for (const auto& [s, v] : keys) m_new = std::max(m_new, s);
          double sum = 0;
          std::vector<double> pv(d, 0.0);
          for (const auto& [s, v] : keys) {
            const double w = std::exp(s - m_new);
            sum += w;
            for (int x = 0; x < d; ++x) pv[x] += w * v[x];
          }
          const double alpha = std::exp(m - m_new), l_new = alpha * l + sum;
          for (int x = 0; x < d; ++x) o[x] = (alpha * o[x] + pv[x]) / l_new;  // the fault: alpha * l * o meant
          m = m_new, l = l_new;
        }
        for (int x = 0; x < d; ++x) out[static_cast<std::size_t>((p.seq_offsets[b] + t) * p.heads_q + h) * d + x] = static_cast<float>(o[x]);
      }
  const ReadingSearch s = search(c, out);
  BOOST_TEST_REQUIRE(!s.reproducing.empty(), "closest " << (s.closest ? s.closest->name() + ": " + s.closest->words() : "-"));
  BOOST_TEST(s.reproducing.front().name() == "normalized_update_drops_the_old_row_sum", s.reproducing.front().words());
  BOOST_TEST(s.reproducing.front().words().find("16") != std::string::npos, s.reproducing.front().words());
}
