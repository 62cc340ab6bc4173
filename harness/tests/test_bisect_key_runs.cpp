// Bisect's measurement of the keys each failing row attends (key_runs.cpp) and the row geometry
// (row_geometry.cpp), on outputs a hidden edge rule made: the rule is named and reproduced; an output
// no run of keys gives is not measured; the failing rows are told by position and tile.
#define BOOST_TEST_MODULE harness_bisect_key_runs
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "../src/bisect/key_runs.hpp"
#include "../src/bisect/output_grid.hpp"
#include "../src/bisect/zero_rows.hpp"
#include "../src/bisect/steps.hpp"
#include "swa/golden.hpp"
#include "swa/readings.hpp"

using namespace swa;
using namespace swa::harness;

namespace swa::harness {
std::ostream& operator<<(std::ostream& o, Confidence c) { return o << confidence_name(c); }
}  // namespace swa::harness

namespace {

// Two sequences (one not a multiple of any tile), GQA 4/2, a window of 21 keys (not a tile multiple),
// a cap that bites and sinks.
void spec_of(ProblemSpec& s) {
  s.seq_lens = {75, 40};
  s.heads_q = 4, s.heads_kv = 2, s.head_size = 32;
  s.band = {20, 0};
  s.scale = 0.3f;
  s.softcap = 6.5f;
  s.sinks = true;
  s.seed = 17;
}

std::vector<double> dut_output(const AttnParams& p, const golden::Reading& r) {
  std::vector<double> out = golden::read_all(p, r);
  for (double& x : out) x = static_cast<float>(x);
  return out;
}

std::vector<double> limits(const AttnParams& p) { return std::vector<double>(static_cast<std::size_t>(total_tokens(p)), 2e-6); }

}  // namespace

BOOST_AUTO_TEST_CASE(a_first_key_rounded_to_a_tile_is_measured_and_reproduced) {
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  golden::Reading r;
  r.lower_edge.rounding = golden::EdgeRounding::down_to_key_tile;
  r.lower_edge.key_tile = 16;
  const auto fit = fit_key_runs(pr, dut_output(pr.params, r), golden::run(pr.params).out, limits(pr.params));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->reproduced);
  BOOST_TEST(fit->name == "first_key_rounded_down_to_16", fit->name << ": " << fit->words);
  BOOST_TEST(fit->measured == std::min<std::int64_t>(fit->failing, 192));
  const Finding f = key_run_finding(*fit);
  BOOST_TEST(f.confidence == Confidence::high, f.why);
  BOOST_TEST(f.reproduced);
}

BOOST_AUTO_TEST_CASE(a_window_taken_from_the_query_tile_s_first_row_is_named_as_such) {
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  golden::Reading r;
  r.lower_edge.anchor = r.upper_edge.anchor = golden::EdgeAnchor::query_tile_first_row;
  r.lower_edge.query_tile = r.upper_edge.query_tile = 32;
  const auto fit = fit_key_runs(pr, dut_output(pr.params, r), golden::run(pr.params).out, limits(pr.params));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->reproduced);
  BOOST_TEST(fit->name == "window_from_query_tile_first_row_32", fit->name << ": " << fit->words);
}

BOOST_AUTO_TEST_CASE(an_output_no_run_of_keys_gives_is_not_measured) {
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  std::vector<double> out = dut_output(pr.params, {});
  for (double& x : out) x *= 1.001;  // every row off by a factor: weights that do not sum to one
  BOOST_TEST(!fit_key_runs(pr, out, golden::run(pr.params).out, limits(pr.params)).has_value());
  // The golden's own output: nothing fails, nothing to measure.
  BOOST_TEST(!fit_key_runs(pr, dut_output(pr.params, {}), golden::run(pr.params).out, limits(pr.params)).has_value());
}

BOOST_AUTO_TEST_CASE(rows_are_told_by_position_and_tile) {
  // The last 3 rows of a 131-token sequence, none of a 64-token one: the last partial tile of 8..64.
  std::vector<std::vector<bool>> rows = {std::vector<bool>(131, false), std::vector<bool>(64, false)};
  for (int t = 128; t < 131; ++t) rows[0][t] = true;
  const std::string told = row_set_geometry(rows, {131, 64});
  BOOST_TEST(told.find("rows 128..130 (its last 3)") != std::string::npos, told);
  BOOST_TEST(told.find("last, partial query tile of every sequence, for a tile of 8, 16, 32, 64 rows") != std::string::npos, told);
  // Rows 32..47 of the first: aligned on 16 (and 8, 32 at its start), not the last tile.
  rows[0].assign(131, false);
  for (int t = 32; t < 48; ++t) rows[0][t] = true;
  const std::string aligned = row_set_geometry(rows, {131, 64});
  BOOST_TEST(aligned.find("Every range starts on a multiple of 8, 16 and ends") != std::string::npos, aligned);
}

BOOST_AUTO_TEST_CASE(keys_past_the_last_read_as_zero_keys_are_counted_and_reproduced) {
  // A two-sided window reaching past a sequence's end, the keys padded to a 16-key tile with keys of
  // score 0 and value 0: the spec's run and a number of zero keys that follows the tile.
  ProblemSpec s;
  spec_of(s);
  s.band = {20, 5};
  Problem pr;
  build_problem(s, pr);
  golden::Reading r;
  r.padded_key_tile = 16;
  const auto fit = fit_key_runs(pr, dut_output(pr.params, r), golden::run(pr.params).out, limits(pr.params));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->name == "zero_keys_attended");
  BOOST_TEST(fit->reproduced, fit->words);
  BOOST_TEST(fit->words.find("16-key tile") != std::string::npos, fit->words);
}

BOOST_AUTO_TEST_CASE(a_rule_that_holds_only_in_some_rows_is_fitted_with_its_condition) {
  // Made without bisect's models: a kernel that drops the 16-key tile holding a row's own key when the
  // row ends that tile ((t + 1) % 16 == 0: a full last page read as empty), the spec elsewhere.
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  std::vector<double> out = dut_output(p, {});
  const int d = p.head_size, group = p.heads_q / p.heads_kv;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 15; t < p.seq_lens[b]; t += 16)
      for (int h = 0; h < p.heads_q; ++h) {
        const std::int64_t first = std::max<std::int64_t>(0, t - p.band.left), last = t / 16 * 16 - 1;
        const std::size_t row = static_cast<std::size_t>(pr.seq_offsets[b] + t) * p.heads_q + h;
        const float* q = &pr.q[row * d];
        std::vector<double> acc(d, 0.0);
        double denominator = std::exp(static_cast<double>(p.sinks[h]));  // the sink: weight, no value
        for (std::int64_t j = first; j <= last; ++j) {
          const std::size_t kv = (static_cast<std::size_t>(pr.seq_offsets[b] + j) * p.heads_kv + h / group) * d;
          double dot = 0;
          for (int x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * pr.k[kv + x];
          const double w = std::exp(p.softcap * std::tanh(p.scale * dot / p.softcap));
          denominator += w;
          for (int x = 0; x < d; ++x) acc[x] += w * pr.v[kv + x];
        }
        for (int x = 0; x < d; ++x) out[row * d + x] = static_cast<float>(acc[x] / denominator);
      }
  const auto fit = fit_key_runs(pr, out, golden::run(p).out, limits(p));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->reproduced, fit->name << ": " << fit->pattern);
  BOOST_TEST(fit->name == "newest_key_tile_dropped_16_in_rows_row_ends_a_16_tile", fit->name << ": " << fit->words);
  BOOST_TEST(fit->words.find("(t + 1) % 16 == 0") != std::string::npos, fit->words);
  // The same rows dropped in every row: no condition is needed, the unconditional rule is named.
  golden::Reading every;
  every.upper_edge.rounding = golden::EdgeRounding::down_to_key_tile;
  every.upper_edge.key_tile = 16;
  const auto plain = fit_key_runs(pr, dut_output(p, every), golden::run(p).out, limits(p));
  BOOST_TEST_REQUIRE(plain.has_value());
  BOOST_TEST(plain->name.find("_in_rows_") == std::string::npos, plain->name);
}

namespace {

// Each row's softmax over the run [first, last] of its own keys that `run(b, t)` names (first > last:
// no key, output 0), key j counted count(b, t, j) times; written without bisect's models.
using RunOf = std::function<std::pair<std::int64_t, std::int64_t>(int, std::int64_t)>;
std::vector<double> softmax_rows(const Problem& pr, const RunOf& run,
                                 const std::function<int(int, std::int64_t, std::int64_t)>& count) {
  const AttnParams& p = pr.params;
  std::vector<double> out = dut_output(p, {});
  const int d = p.head_size, group = p.heads_q / p.heads_kv;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        const auto [first, last] = run(b, t);
        const std::size_t row = static_cast<std::size_t>(pr.seq_offsets[b] + t) * p.heads_q + h;
        const float* q = &pr.q[row * d];
        std::vector<double> acc(d, 0.0);
        double denominator = std::exp(static_cast<double>(p.sinks[h]));
        for (std::int64_t j = first; j <= last; ++j) {
          const std::size_t kv = (static_cast<std::size_t>(pr.seq_offsets[b] + j) * p.heads_kv + h / group) * d;
          double dot = 0;
          for (int x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * pr.k[kv + x];
          const double w = count(b, t, j) * std::exp(p.softcap * std::tanh(p.scale * dot / p.softcap));
          denominator += w;
          for (int x = 0; x < d; ++x) acc[x] += w * pr.v[kv + x];
        }
        for (int x = 0; x < d; ++x) out[row * d + x] = static_cast<float>(acc[x] / denominator);
      }
  return out;
}

// Each row's softmax over its causal window, key j counted count(b, t, j) times.
std::vector<double> weighted_rows(const Problem& pr, const std::function<int(int, std::int64_t, std::int64_t)>& count) {
  const std::int64_t left = pr.params.band.left;
  return softmax_rows(pr, [left](int, std::int64_t t) { return std::pair(std::max<std::int64_t>(0, t - left), t); }, count);
}

}  // namespace

BOOST_AUTO_TEST_CASE(keys_counted_twice_are_recovered_and_their_rule_reproduced) {
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  const auto ref = golden::run(p).out;
  // 24-key tiles (no tile of the common list) read as [s, s + 24]: the first key of each tile past
  // the window's first is counted twice.
  const auto tiles = fit_key_runs(pr, weighted_rows(pr, [&](int, std::int64_t t, std::int64_t j) {
    return j % 24 == 0 && j > std::max<std::int64_t>(0, t - p.band.left) ? 2 : 1;
  }), ref, limits(p));
  BOOST_TEST_REQUIRE(tiles.has_value());
  BOOST_TEST(tiles->reproduced, tiles->name << ": " << tiles->pattern);
  BOOST_TEST(tiles->name == "tile_first_key_counted_twice_24", tiles->name << ": " << tiles->words);
  BOOST_TEST(key_run_finding(*tiles).confidence == Confidence::high);
  // The own key counted twice in every row.
  const auto own = fit_key_runs(pr, weighted_rows(pr, [](int, std::int64_t t, std::int64_t j) { return j == t ? 2 : 1; }), ref,
                                limits(p));
  BOOST_TEST_REQUIRE(own.has_value());
  BOOST_TEST(own->name == "newest_key_counted_twice", own->name << ": " << own->pattern);
  // Keys counted twice by no rule of a row's position: measured, told, medium.
  const auto scattered = fit_key_runs(pr, weighted_rows(pr, [](int b, std::int64_t t, std::int64_t j) {
    return (j * 7 + t * 3 + b) % 11 == 0 ? 2 : 1;
  }), ref, limits(p));
  BOOST_TEST_REQUIRE(scattered.has_value());
  BOOST_TEST(!scattered->reproduced, scattered->name);
  BOOST_TEST(scattered->name == "keys_counted_twice");
  const Finding f = key_run_finding(*scattered);
  BOOST_TEST(f.confidence == Confidence::medium, f.why);
  BOOST_TEST(f.evidence.size() >= 2);
}

namespace {

// One block's softmax over keys [a, z] of row (b, t, h), computed here: its max score, its sum of
// exponentials, and its normalised output.
struct BlockPartial {
  double max = 0, sum = 0;
  std::vector<double> out;
};
BlockPartial block_partial(const Problem& pr, int b, std::int64_t t, int h, std::int64_t a, std::int64_t z) {
  const AttnParams& p = pr.params;
  const int d = p.head_size, group = p.heads_q / p.heads_kv;
  const float* q = &pr.q[(static_cast<std::size_t>(pr.seq_offsets[b] + t) * p.heads_q + h) * d];
  auto kv_of = [&](std::int64_t j) { return (static_cast<std::size_t>(pr.seq_offsets[b] + j) * p.heads_kv + h / group) * d; };
  std::vector<double> s;
  for (std::int64_t j = a; j <= z; ++j) {
    double dot = 0;
    for (int x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * pr.k[kv_of(j) + x];
    s.push_back(p.softcap * std::tanh(p.scale * dot / p.softcap));
  }
  BlockPartial r;
  r.max = *std::max_element(s.begin(), s.end());
  r.out.assign(d, 0.0);
  for (std::int64_t j = a; j <= z; ++j) {
    const double w = std::exp(s[j - a] - r.max);
    r.sum += w;
    for (int x = 0; x < d; ++x) r.out[x] += w * pr.v[kv_of(j) + x];
  }
  for (double& x : r.out) x /= r.sum;
  return r;
}

// A split-KV kernel written without bisect's models: each row's window split on multiples of 12
// positions (no tile of any list), each split's softmax alone, its LSE kept as `lse_of(max, l)`, the
// partial outputs merged as natural logs with the sink as a natural-log logit, each split's weight
// then multiplied by `skew(t, split)`.
std::vector<double> split_rows(const Problem& pr, const std::function<double(double, double)>& lse_of,
                               const std::function<double(std::int64_t, int)>& skew) {
  const AttnParams& p = pr.params;
  std::vector<double> out = dut_output(p, {});
  const int d = p.head_size;
  constexpr std::int64_t kSplit = 12;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        const std::int64_t first = std::max<std::int64_t>(0, t - p.band.left);
        const std::size_t row = static_cast<std::size_t>(pr.seq_offsets[b] + t) * p.heads_q + h;
        std::vector<std::vector<double>> partial;
        std::vector<double> lse;
        for (std::int64_t a = first; a <= t; a = (a / kSplit + 1) * kSplit) {
          const BlockPartial x = block_partial(pr, b, t, h, a, std::min(t, (a / kSplit + 1) * kSplit - 1));
          partial.push_back(x.out);
          lse.push_back(lse_of(x.max, x.sum));
        }
        double top = p.sinks[h];
        for (double x : lse) top = std::max(top, x);
        double z = std::exp(p.sinks[h] - top);
        std::vector<double> o(d, 0.0);
        for (std::size_t i = 0; i < lse.size(); ++i) {
          const double w = std::exp(lse[i] - top) * skew(t, static_cast<int>(i));
          z += w;
          for (int x = 0; x < d; ++x) o[x] += w * partial[i][x];
        }
        for (int x = 0; x < d; ++x) out[row * d + x] = static_cast<float>(o[x] / z);
      }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(split_kv_merge_weights_are_solved_and_their_rule_reproduced) {
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  const auto ref = golden::run(p).out;
  // Each split's LSE kept in base 2 (max * log2 e + log2 l, as an exp2 softmax keeps it) and merged as
  // natural logs.
  const auto base2 = fit_key_runs(pr, split_rows(pr, [](double m, double l) { return m / std::log(2.0) + std::log2(l); },
                                                 [](std::int64_t, int) { return 1.0; }),
                                  ref, limits(p));
  BOOST_TEST_REQUIRE(base2.has_value());
  BOOST_TEST((base2->kind == KeyRunKind::splits), base2->name);
  BOOST_TEST(base2->reproduced, base2->name << ": " << base2->words << " / " << base2->refuted);
  BOOST_TEST(base2->name == "split_merge_weights");
  BOOST_TEST(base2->words.find("runs of 12") != std::string::npos, base2->words);
  BOOST_TEST(base2->words.find("1/ln 2") != std::string::npos, base2->words);
  BOOST_TEST(key_run_finding(*base2).confidence == Confidence::high);
  // Weights skewed by no rule of a merge: the split weights solved and told, at most medium.
  const auto skewed = fit_key_runs(pr, split_rows(pr, [](double m, double l) { return m + std::log(l); },
                                                  [](std::int64_t t, int i) { return 1.0 + 0.4 * static_cast<double>((t * 7 + i * 3) % 5); }),
                                   ref, limits(p));
  BOOST_TEST_REQUIRE(skewed.has_value());
  BOOST_TEST((skewed->kind == KeyRunKind::splits), skewed->name);
  BOOST_TEST(!skewed->reproduced, skewed->words);
  BOOST_TEST(skewed->name == "split_merge_weights_differ");
  BOOST_TEST(key_run_finding(*skewed).confidence == Confidence::medium);
}

BOOST_AUTO_TEST_CASE(outputs_through_a_narrower_type_and_rows_left_zero_are_reproduced) {
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  const auto ref = golden::run(p).out;
  for (const DType narrower : {DType::bf16, DType::fp16}) {
    std::vector<double> out = ref;
    for (double& x : out) x = round_to(DType::fp32, round_to(narrower, static_cast<float>(x)));
    const auto f = output_through_narrower_type(pr, out, ref, limits(p));
    BOOST_TEST_REQUIRE(f.has_value(), dtype_name(narrower));
    BOOST_TEST(f->name == "output_rounded_through_" + std::string(dtype_name(narrower)));
    BOOST_TEST(f->reproduced);
  }
  BOOST_TEST(!output_through_narrower_type(pr, dut_output(p, {}), ref, limits(p)).has_value());
  // The last 15 rows of the first sequence written as zeros: rows not computed, told by position.
  std::vector<double> out = dut_output(p, {});
  for (std::int64_t t = 60; t < p.seq_lens[0]; ++t)
    for (int x = 0; x < p.heads_q * p.head_size; ++x) out[static_cast<std::size_t>(t * p.heads_q) * p.head_size + x] = 0.0;
  const ZeroRows z = count_zero_rows(pr, out, ref, limits(p));
  BOOST_TEST(every_failing_row_zero(z));
  BOOST_TEST(z.failing == 15 * p.heads_q);
  // One more failing row, tiny but not zero (a row computed and scaled away): not every failing row is zero.
  for (int x = 0; x < p.head_size; ++x) out[static_cast<std::size_t>(10 * p.heads_q) * p.head_size + x] *= 1e-6;
  BOOST_TEST(!every_failing_row_zero(count_zero_rows(pr, out, ref, limits(p))));
}

BOOST_AUTO_TEST_CASE(a_block_plan_that_takes_a_key_tile_whole_by_its_first_key_is_named_and_reproduced) {
  // A kernel with 16-row query tiles and 32-key tiles on positions whose plan takes a pair whole when
  // the tile's first key (not its last) is at or before the query tile's first row and the tile's
  // first key is in the last row's window: the diagonal tiles it so judges leak their future keys.
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  const std::int64_t L = p.band.left;
  const RunOf plan = [&](int b, std::int64_t t) {
    const std::int64_t qs = t / 16 * 16, qe = qs + 15, n = p.seq_lens[b];
    std::int64_t first = std::max<std::int64_t>(0, t - L), last = t;
    for (std::int64_t ks = 0; ks < n; ks += 32) {
      const std::int64_t ke = std::min(ks + 31, n - 1);
      const bool skipped = ks + 31 < std::max<std::int64_t>(0, qs - L) || ks > std::min(qe, n - 1);
      if (!skipped && ks >= qe - L && ks <= qs) first = std::min(first, ks), last = std::max(last, ke);
    }
    return std::pair(first, last);
  };
  const std::vector<double> out = softmax_rows(pr, plan, [](int, std::int64_t, std::int64_t) { return 1; });
  const auto fit = fit_key_runs(pr, out, golden::run(p).out, limits(p));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->reproduced, fit->name << ": " << fit->pattern);
  BOOST_TEST(fit->name == "block_plan_whole_right_test_on_key_tile_first_key_16x32", fit->name << ": " << fit->words);
  BOOST_TEST(fit->words.find("its first key <= the last key the query tile's first row sees") != std::string::npos, fit->words);
  BOOST_TEST(key_run_finding(*fit).confidence == Confidence::high);
}

BOOST_AUTO_TEST_CASE(a_plan_that_places_a_chunk_s_rows_at_their_absolute_positions_in_its_key_buffer_is_named) {
  // Chunked prefill: each call's key buffer holds its window's cached keys, then its own. A kernel
  // whose plan takes a row's index in that buffer to be its absolute position (the call's offset
  // not subtracted) picks 16-key tiles of the buffer for a later row: rows whose keys all lie in
  // the tiles it skips attend no key (exactly 0), others lose their oldest keys.
  ProblemSpec s;
  spec_of(s);
  s.mode = RunMode::chunked_prefill, s.chunk = 24;
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  const std::int64_t L = p.band.left;
  // The kernel as it would be written: key tiles of the buffer, the plan's first tile from the
  // first row's believed buffer index (its position), each walked tile masked by true positions.
  const RunOf kernel = [&](int, std::int64_t t) {
    const std::int64_t c0 = t / 24 * 24, buffer0 = std::max<std::int64_t>(0, c0 - L);
    const std::int64_t r0 = (t - c0) / 16 * 16;
    const std::int64_t believed_index = c0 + r0;  // should be (c0 - buffer0) + r0
    const std::int64_t kb0 = std::max<std::int64_t>(0, believed_index - L) / 16;
    const std::int64_t first = std::max(std::max<std::int64_t>(0, t - L), buffer0 + kb0 * 16);
    return std::pair(first, t);
  };
  const std::vector<double> out = softmax_rows(pr, kernel, [](int, std::int64_t, std::int64_t) { return 1; });
  const auto fit = fit_key_runs(pr, out, golden::run(p).out, limits(p));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->reproduced, fit->name << ": " << fit->pattern);
  // Query tiles from the call's first row or on positions: this case need not tell them apart.
  BOOST_TEST(fit->name.find("block_plan_rows_at_their_positions_in_the_call_buffer_16x16") == 0, fit->name << ": " << fit->words);
  BOOST_TEST(fit->name.find("key_tiles_from_call_first_key") != std::string::npos, fit->name);
}

BOOST_AUTO_TEST_CASE(a_plan_counted_in_one_key_tile_and_walked_in_another_is_named) {
  // A plan of first and last 32-key tiles per 32-row query tile, its tile indices walked as 16-key
  // tiles: a row keeps only the keys of the walked tiles (often none: rows exactly 0).
  ProblemSpec s;
  spec_of(s);
  s.seq_lens = {150, 70};
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  const std::int64_t L = p.band.left;
  const RunOf kernel = [&](int, std::int64_t t) {
    const std::int64_t qs = t / 32 * 32, qe = qs + 31;
    const std::int64_t kb0 = std::max<std::int64_t>(0, qs - L) / 32, kb_end = qe / 32 + 1;  // plan tiles [kb0, kb_end)
    const std::int64_t first = std::max(std::max<std::int64_t>(0, t - L), kb0 * 16), last = std::min(t, kb_end * 16 - 1);
    return std::pair(first, last);
  };
  const std::vector<double> out = softmax_rows(pr, kernel, [](int, std::int64_t, std::int64_t) { return 1; });
  const auto fit = fit_key_runs(pr, out, golden::run(p).out, limits(p));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->reproduced, fit->name << ": " << fit->pattern);
  BOOST_TEST(fit->name.find("block_plan_counted_in_32_key_tiles_walked_in_16_32x32") == 0, fit->name << ": " << fit->words);
}

BOOST_AUTO_TEST_CASE(decode_rows_exactly_0_from_a_literal_window_left_of_minus_1_are_told_by_their_rule_at_medium) {
  // Decode with no left edge (window_left -1), read by the kernel as a left edge: every decode row
  // attends no key and is exactly 0. The rule names why; on this case alone it is not told from rows
  // never computed, so medium, with that alternative printed. Sequences shorter than 128 keys: a
  // rule on a 128- or 256-key tile (a last tile that never fills) must not be the one named.
  ProblemSpec s;
  spec_of(s);
  s.seq_lens = {70, 45};
  s.band = {-1, 0};
  s.mode = RunMode::decode, s.decode_steps = 6;
  s.cache = CachePolicy::linear;
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  const RunOf kernel = [&](int b, std::int64_t t) {
    const bool decode = t >= p.seq_lens[b] - 6;
    return decode ? std::pair<std::int64_t, std::int64_t>(t + 1, t) : std::pair<std::int64_t, std::int64_t>(0, t);
  };
  const std::vector<double> out = softmax_rows(pr, kernel, [](int, std::int64_t, std::int64_t) { return 1; });
  const std::vector<double> ref = golden::run(p).out;
  const ZeroRows z = count_zero_rows(pr, out, ref, limits(p));
  BOOST_TEST_REQUIRE(every_failing_row_zero(z));
  const auto fit = fit_key_runs(pr, out, ref, limits(p));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->reproduced, fit->name << ": " << fit->pattern);
  BOOST_TEST(fit->name == "first_key_after_its_own_window_left_minus_1_read_as_an_edge", fit->name << ": " << fit->words);
  const Finding f = zero_rows_finding(z, "", "", fit);
  BOOST_TEST(f.name == fit->name);
  BOOST_TEST(f.confidence == Confidence::medium, f.why);
  BOOST_TEST(f.why.find("never computed") != std::string::npos, f.why);
  // Without a rule: rows_not_computed.
  BOOST_TEST(zero_rows_finding(z, "", "", std::nullopt).name == "rows_not_computed");
}

BOOST_AUTO_TEST_CASE(a_block_count_rounded_down_leaves_the_newest_keys_before_its_own_out) {
  // A decode-style kernel walking the keys before a row's own in blocks of 8 from its window's
  // first key, floor(keys / 8) blocks (at least one), its own key attended apart: the keys past the
  // last whole block are never weighed.
  ProblemSpec s;
  spec_of(s);
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  const auto fit = fit_key_runs(pr, weighted_rows(pr, [&](int, std::int64_t t, std::int64_t j) {
    const std::int64_t first = std::max<std::int64_t>(0, t - p.band.left), before = t - first;
    const std::int64_t walked_end = first + std::max<std::int64_t>(1, before / 8) * 8;
    return j >= walked_end && j < t ? 0 : 1;
  }), golden::run(p).out, limits(p));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST(fit->reproduced, fit->name << ": " << fit->pattern);
  BOOST_TEST(fit->name == "keys_past_the_last_whole_8_key_block_left_out", fit->name << ": " << fit->words);
}

BOOST_AUTO_TEST_CASE(blocks_merged_by_their_max_alone_with_the_own_key_in_the_last_block_are_named) {
  // Multi-block decode, written here: the keys before a row's own in blocks of 12 from its window's
  // first key, its own key joining the last block; each block's normalised output weighed by
  // e^(its max - the max) alone (its sum of exponentials left out), over their sum and the sink's term.
  // A window of 24 keys before its own: on the plain grid the own key would be a split alone.
  ProblemSpec s;
  spec_of(s);
  s.band = {24, 0};
  Problem pr;
  build_problem(s, pr);
  const AttnParams& p = pr.params;
  std::vector<double> out = dut_output(p, {});
  const int d = p.head_size;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        const std::int64_t first = std::max<std::int64_t>(0, t - p.band.left);
        const std::size_t row = static_cast<std::size_t>(pr.seq_offsets[b] + t) * p.heads_q + h;
        std::vector<std::pair<std::int64_t, std::int64_t>> blocks;
        for (std::int64_t a = first; a < t; a += 12) blocks.push_back({a, std::min(a + 11, t - 1)});
        if (blocks.empty()) blocks.push_back({t, t});
        else blocks.back().second = t;
        std::vector<double> maxima, o(d, 0.0);
        std::vector<std::vector<double>> partial;
        for (const auto& [a, z] : blocks) {
          const BlockPartial x = block_partial(pr, b, t, h, a, z);
          maxima.push_back(x.max), partial.push_back(x.out);
        }
        double top = p.sinks[h];
        for (double m : maxima) top = std::max(top, m);
        double z = std::exp(p.sinks[h] - top);
        for (std::size_t i = 0; i < maxima.size(); ++i) {
          const double w = std::exp(maxima[i] - top);  // the fault: times the block's l meant
          z += w;
          for (int x = 0; x < d; ++x) o[x] += w * partial[i][x];
        }
        for (int x = 0; x < d; ++x) out[row * d + x] = static_cast<float>(o[x] / z);
      }
  const auto fit = fit_key_runs(pr, out, golden::run(p).out, limits(p));
  BOOST_TEST_REQUIRE(fit.has_value());
  BOOST_TEST((fit->kind == KeyRunKind::splits), fit->name);
  BOOST_TEST(fit->reproduced, fit->name << ": " << fit->words << " / " << fit->refuted);
  BOOST_TEST(fit->words.find("its own key in the last split") != std::string::npos, fit->words);
  BOOST_TEST(fit->words.find("gamma = 0 (") != std::string::npos, fit->words);
}
