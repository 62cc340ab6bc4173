// bisect: where the failing rows are, in the schedule and against the window; where the output stops being a number.
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

// Where the DUT's output stops being a number: counts, the first non-finite element in memory order,
// and how many keys its row sees (a row with none, fully masked, is where a naive softmax makes 0/0).
// Empty when every element is finite.
std::string non_finite_summary(const Scenario& s, const BisectRun& e) {
  const Problem& pr = e.reference->problem;
  const AttnParams& p = pr.params;
  std::int64_t nans = 0, infs = 0, first = -1;
  for (std::size_t i = 0; i < e.out.size(); ++i) {
    if (std::isfinite(e.out[i])) continue;
    (std::isnan(e.out[i]) ? nans : infs) += 1;
    if (first < 0) first = static_cast<std::int64_t>(i);
  }
  if (first < 0) return {};
  const std::int64_t row = first / (static_cast<std::int64_t>(s.heads) * s.head_size);
  const int head = static_cast<int>(first / s.head_size % s.heads), dim = static_cast<int>(first % s.head_size);
  int b = 0;
  while (b + 1 < p.batch && p.seq_offsets[b + 1] <= row) ++b;
  const std::int64_t t = row - p.seq_offsets[b];
  const std::int64_t keys = band_end_key(p.band, t, p.seq_lens[b]) - band_first_key(p.band, t);
  std::ostringstream o;
  o << "The output is not finite: " << nans << " NaN and " << infs << " Inf elements; the first at sequence " << b
    << ", token " << t << ", head " << head << ", dim " << dim << ", a row that sees " << keys << " key(s)"
    << (keys <= 0 ? " (fully masked: a softmax without the empty-row rule divides 0 by 0)" : "") << " while the golden"
    << " gives " << e.ref[static_cast<std::size_t>(first)] << " there. No variant that is finite there can explain it.";
  // NaN provenance, element by element, from the bits: the harness's fill (a payload no arithmetic
  // makes) was never written; any other NaN the DUT computed.
  std::int64_t unwritten = 0, first_unwritten = -1;
  for (std::size_t i = 0; i < e.out.size(); ++i)
    if (is_output_fill(s.dtype, e.out[i]) && unwritten++ == 0) first_unwritten = static_cast<std::int64_t>(i);
  if (unwritten > 0) {
    const std::int64_t token_row = first_unwritten / (static_cast<std::int64_t>(s.heads) * s.head_size);
    int seq = 0;
    while (seq + 1 < p.batch && p.seq_offsets[seq + 1] <= token_row) ++seq;
    o << " " << unwritten << " of the NaN elements still hold the harness's fill (its bit pattern, which no arithmetic"
      << " makes): the DUT never wrote them (the first: sequence " << seq << ", token " << token_row - p.seq_offsets[seq]
      << ", head " << first_unwritten / s.head_size % s.heads << ", dim " << first_unwritten % s.head_size << ")";
    o << (unwritten == nans ? "." : "; the other " + std::to_string(nans - unwritten) + " NaN the DUT computed.");
  } else if (nans > 0) {
    o << " Every NaN is one the DUT computed (none holds the harness's fill): it wrote them.";
  }
  return o.str();
}


SchedulePlace place_of(const AttnParams& p, int b, std::int64_t t) {
  const std::int64_t prompt = prompt_len(p, b);
  if (p.mode == RunMode::decode && t >= prompt) return {true, t - prompt};
  const std::int64_t chunk = p.mode == RunMode::prefill ? 0 : (p.chunk > 0 ? p.chunk : prompt);
  return {false, chunk > 0 ? t / chunk : 0};
}


RowError row_error(const Scenario& s, const BisectRun& e, int b, std::int64_t t, int h) {
  const Problem& pr = e.reference->problem;
  RowError r;
  for (int k = 0; k < s.head_size; ++k) {
    const std::size_t i = ((pr.seq_offsets[b] + t) * s.heads + h) * s.head_size + k;
    const double err = std::abs(e.out[i] - e.ref[i]);
    r.finite_output = r.finite_output && std::isfinite(e.out[i]);
    r.zero_output = r.zero_output && e.out[i] == 0.0;
    r.worst = std::isfinite(err) ? std::max(r.worst, err) : std::numeric_limits<double>::infinity();
  }
  return r;
}

// The max-abs limit of token t of sequence b: its phase's.
double limit_of(const BisectRun& e, int b, std::int64_t t) {
  return e.row_limit[static_cast<std::size_t>(e.reference->problem.seq_offsets[b] + t)];
}


// The rows over the threshold in schedule order (then sequence, token, head), at most `limit`; with
// finite_only, those whose output is finite (a NaN row cannot be fitted).
std::vector<FailingRow> failing_rows(const Scenario& s, const BisectRun& e, std::size_t limit, bool finite_only,
                                     bool nonzero_only) {
  const AttnParams& p = e.reference->problem.params;
  std::vector<std::pair<SchedulePlace, FailingRow>> rows;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < s.heads; ++h) {
        const RowError row = row_error(s, e, b, t, h);
        if (row.worst > limit_of(e, b, t) && (!finite_only || row.finite_output) && (!nonzero_only || !row.zero_output))
          rows.push_back({place_of(p, b, t), {b, h, t}});
      }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<FailingRow> out;
  for (std::size_t i = 0; i < rows.size() && i < limit; ++i) out.push_back(rows[i].second);
  return out;
}

// Which rows fail, when only some do: only decode steps, only chunks after the first, only the
// first rows of a sequence, only sequences after the first, only some heads. Empty when nothing
// narrows it.
std::vector<std::string> failing_row_pattern(const Scenario& s, const BisectRun& e) {
  const AttnParams& p = e.reference->problem.params;
  std::int64_t failing = 0, decode = 0, prompt = 0, later_chunks = 0, first_rows = 0, chunked_prompt_rows = 0;
  std::set<int> sequences, heads;
  std::int64_t rows = 0, rows_decode = 0, rows_first = 0;
  const std::int64_t w = s.window > 0 ? s.window : -1;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t) {
      const SchedulePlace place = place_of(p, b, t);
      rows += 1;
      rows_decode += place.decode;
      rows_first += w > 0 && t < w - 1;
      for (int h = 0; h < s.heads; ++h) {
        if (!(row_error(s, e, b, t, h).worst > limit_of(e, b, t))) continue;
        ++failing;
        sequences.insert(b);
        heads.insert(h);
        (place.decode ? decode : prompt) += 1;
        if (!place.decode && p.mode != RunMode::prefill && p.chunk > 0) {
          ++chunked_prompt_rows;
          later_chunks += place.index > 0;
        }
        first_rows += w > 0 && t < w - 1;
      }
    }
  std::vector<std::string> pattern;
  if (failing == 0) return pattern;
  if (decode == failing && rows_decode < rows) pattern.push_back("only decode steps fail, no prompt row");
  if (prompt == failing && rows_decode > 0) pattern.push_back("only prompt rows fail, no decode step");
  if (chunked_prompt_rows > 0 && later_chunks == chunked_prompt_rows && chunked_prompt_rows == prompt)
    pattern.push_back("only chunks after the first fail");
  if (w > 1 && first_rows == failing && rows_first < rows)
    pattern.push_back("only the first " + std::to_string(w - 1) + " rows of a sequence fail (their window is not yet full)");
  if (p.batch > 1 && !sequences.count(0)) pattern.push_back("only sequences after the first fail");
  if (static_cast<int>(heads.size()) < s.heads) {
    std::vector<std::string> names, groups;
    std::set<int> kv;
    for (int h : heads) names.push_back(std::to_string(h)), kv.insert(kv_head_for(h, s.heads, s.kv_heads));
    for (int g : kv) groups.push_back(std::to_string(g));
    pattern.push_back("only query head(s) " + join(names, ", ") + " of " + std::to_string(s.heads) + " fail (kv head(s) " +
                      join(groups, ", ") + ")");
  }
  return pattern;
}

// The first query row, in schedule order, whose error exceeds the threshold; and per sequence, the
// first failing decode step or chunk (a decode bug shows at each sequence's own first step).
std::string localize(const Scenario& s, const BisectRun& e) {
  const Problem& pr = e.reference->problem;
  const AttnParams& p = pr.params;
  std::int64_t best_seq = -1, best_token = 0, best_head = -1, rows_over = 0;
  SchedulePlace best_place;
  std::vector<std::optional<std::pair<SchedulePlace, std::int64_t>>> first_in_sequence(p.batch);
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < s.heads; ++h) {
        if (!(row_error(s, e, b, t, h).worst > limit_of(e, b, t))) continue;
        ++rows_over;
        const SchedulePlace here = place_of(p, b, t);
        if (!first_in_sequence[b]) first_in_sequence[b] = std::pair(here, t);
        if (best_seq < 0 || here < best_place || (!(best_place < here) && t < best_token)) {
          best_place = here;
          best_token = t;
          best_seq = b;
          best_head = h;
        }
      }
  std::ostringstream o;
  if (best_seq < 0)
    return e.output_fails ? "no element exceeds its phase's max-abs limit: the outputs fail the verdict by their relative "
                            "L2 error alone (many small errors: the accumulation's precision, not a wrong key)"
                          : "no output row fails: the outputs pass, and the failure is the KV cache's (step 3)";
  const std::int64_t prompt = prompt_len(p, static_cast<int>(best_seq));
  o << rows_over << " (token, head) rows exceed their phase's max-abs limit. The first in schedule order is sequence " << best_seq
    << ", head " << best_head << ", token " << best_token << ".\n";
  if (s.mode != RunMode::prefill) {
    std::vector<std::string> per_sequence;
    for (int b = 0; b < p.batch; ++b) {
      if (!first_in_sequence[b]) {
        per_sequence.push_back("sequence " + std::to_string(b) + ": none");
        continue;
      }
      const auto& [place, token] = *first_in_sequence[b];
      per_sequence.push_back("sequence " + std::to_string(b) + ": " + (place.decode ? "step " : "chunk ") +
                             std::to_string(place.index) + " (token " + std::to_string(token) + ")");
    }
    if (best_place.decode)
      o << "   Decode: the first failing step is " << best_place.index << " (sequence " << best_seq << "'s prompt is "
        << prompt << " tokens).\n";
    else
      o << "   Chunked prefill: the first failing chunk is " << best_place.index << " (chunk size "
        << (s.chunk > 0 ? s.chunk : prompt) << ").\n";
    o << "   First failure per sequence: " << join(per_sequence, "; ") << ".\n";
  }
  if (const auto pattern = failing_row_pattern(s, e); !pattern.empty()) o << "   Pattern: " << join(pattern, "; ") << ".\n";
  if (s.window > 0) {
    const std::int64_t edge = best_token - (s.window - 1);
    o << "   Window edge: token " << best_token << " is " << edge
      << (edge >= 1 ? " rows past the first row whose window is full: it has lost keys to the window."
                    : " rows from the first full window: it still sees every earlier token.") << "\n";
  }
  const int tile = e.traits.query_tile;
  if (tile > 0)
    o << "   Tile position: token " << best_token << " is row " << best_token % tile << " of its " << tile
      << "-row query tile (the DUT's own tile).";
  else
    o << "   Tile position: the DUT states no query tile (dut::Traits).";
  return o.str();
}

}  // namespace swa::harness
