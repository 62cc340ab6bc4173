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

// A split-KV kernel written without bisect's models: each row's window split on multiples of 12
// positions (no tile of any list), each split's softmax alone, its LSE kept as `lse_of(max, l)`, the
// partial outputs merged as natural logs with the sink as a natural-log logit, each split's weight
// then multiplied by `skew(t, split)`.
std::vector<double> split_rows(const Problem& pr, const std::function<double(double, double)>& lse_of,
                               const std::function<double(std::int64_t, int)>& skew) {
  const AttnParams& p = pr.params;
  std::vector<double> out = dut_output(p, {});
  const int d = p.head_size, group = p.heads_q / p.heads_kv;
  constexpr std::int64_t kSplit = 12;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) {
        const std::int64_t first = std::max<std::int64_t>(0, t - p.band.left);
        const std::size_t row = static_cast<std::size_t>(pr.seq_offsets[b] + t) * p.heads_q + h;
        const float* q = &pr.q[row * d];
        std::vector<std::vector<double>> partial;
        std::vector<double> lse;
        for (std::int64_t a = first; a <= t; a = (a / kSplit + 1) * kSplit) {
          const std::int64_t z = std::min(t, (a / kSplit + 1) * kSplit - 1);
          std::vector<double> s;
          for (std::int64_t j = a; j <= z; ++j) {
            const std::size_t kv = (static_cast<std::size_t>(pr.seq_offsets[b] + j) * p.heads_kv + h / group) * d;
            double dot = 0;
            for (int x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * pr.k[kv + x];
            s.push_back(p.softcap * std::tanh(p.scale * dot / p.softcap));
          }
          const double m = *std::max_element(s.begin(), s.end());
          double l = 0;
          std::vector<double> acc(d, 0.0);
          for (std::int64_t j = a; j <= z; ++j) {
            const std::size_t kv = (static_cast<std::size_t>(pr.seq_offsets[b] + j) * p.heads_kv + h / group) * d;
            const double w = std::exp(s[j - a] - m);
            l += w;
            for (int x = 0; x < d; ++x) acc[x] += w * pr.v[kv + x];
          }
          for (double& x : acc) x /= l;
          partial.push_back(acc);
          lse.push_back(lse_of(m, l));
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
