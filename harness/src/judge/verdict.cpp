#include "swa/harness/judge/verdict.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "swa/dut/kv_cache.hpp"
#include "swa/enum_names.hpp"
#include "swa/harness/judge/criteria.hpp"
#include "swa/harness/judge/metrics.hpp"

namespace swa::harness {
namespace {

struct Location {
  std::int64_t seq = -1, token = -1, head = -1, dim = -1, window_edge = 0;
};

// Flat index of [nTokens, Hq, D] -> sequence, token position, head, dim. window_edge is the token's
// position relative to the first row whose window is full (t - (W - 1)): negative rows still see
// every earlier token, rows >= 1 are the first to lose a key to the window.
Location locate(const AttnParams& p, std::int64_t flat) {
  Location l;
  if (flat < 0) return l;
  const std::int64_t row = flat / (static_cast<std::int64_t>(p.heads_q) * p.head_size);
  l.head = flat / p.head_size % p.heads_q;
  l.dim = flat % p.head_size;
  const auto it = std::upper_bound(p.seq_offsets, p.seq_offsets + p.batch + 1, row);
  l.seq = (it - p.seq_offsets) - 1;
  l.token = row - p.seq_offsets[l.seq];
  l.window_edge = p.band.left >= 0 ? l.token - p.band.left : l.token;
  return l;
}

std::string describe(const Location& l) {
  std::ostringstream o;
  o << "seq " << l.seq << " token " << l.token << " head " << l.head << " dim " << l.dim;
  return o.str();
}

// The elements of the phase's rows, in order, as ranges (consecutive rows are one range).
std::vector<ElementRange> element_ranges(const std::vector<std::int64_t>& rows, std::int64_t row_elems) {
  std::vector<ElementRange> ranges;
  for (std::int64_t r : rows) {
    if (!ranges.empty() && ranges.back().last == r * row_elems)
      ranges.back().last += row_elems;
    else
      ranges.push_back({r * row_elems, (r + 1) * row_elems});
  }
  return ranges;
}

}  // namespace

std::vector<Phase> phases_of(const AttnParams& p) {
  std::vector<Phase> phases;
  auto rows = [&](auto begin, auto end) {
    Phase ph;
    for (int b = 0; b < p.batch; ++b)
      for (std::int64_t t = begin(b); t < end(b); ++t) ph.rows.push_back(p.seq_offsets[b] + t);
    return ph;
  };
  if (p.mode == RunMode::prefill) {
    phases.push_back(rows([](int) { return std::int64_t{0}; }, [&](int b) { return std::int64_t{p.seq_lens[b]}; }));
    phases.back().name = "prompt";
    return phases;
  }
  const int chunks = dut::chunk_count(p);
  for (int c = 0; c < chunks; ++c) {
    phases.push_back(rows([&](int b) { return dut::chunk_begin(p, b, c); }, [&](int b) { return dut::chunk_end(p, b, c); }));
    phases.back().name = chunks == 1 ? "prompt" : "chunk " + std::to_string(c);
  }
  if (p.mode == RunMode::decode) {
    phases.push_back(rows([&](int b) { return prompt_len(p, b); }, [&](int b) { return std::int64_t{p.seq_lens[b]}; }));
    phases.back().name = "decode";
  }
  std::erase_if(phases, [](const Phase& ph) { return ph.rows.empty(); });
  return phases;
}

namespace {

// A prefill's one phase is the whole output in order: its comparisons are the whole output's,
// computed once (the same sums in the same order, so the same bits).
bool whole_output(const std::vector<Phase>& phases, std::int64_t row_elems, std::size_t elements) {
  if (phases.size() != 1) return false;
  const auto& rows = phases[0].rows;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i] != static_cast<std::int64_t>(i)) return false;
  return static_cast<std::int64_t>(rows.size()) * row_elems == static_cast<std::int64_t>(elements);
}

std::int64_t row_elements(const AttnParams& p) { return static_cast<std::int64_t>(p.heads_q) * p.head_size; }

}  // namespace

BaselineErrors baseline_errors(const AttnParams& p, std::span<const double> golden, std::span<const float> baseline) {
  const Comparison whole = compare(baseline, golden, p.dtype, 0);
  BaselineErrors e{whole.max_abs, whole.rel_l2, whole.nmse, whole.mean_ulp, {}};
  const std::vector<Phase> phases = phases_of(p);
  if (whole_output(phases, row_elements(p), baseline.size())) {
    e.phases.push_back({whole.max_abs, whole.rel_l2, whole.nmse});
    return e;
  }
  for (const Phase& ph : phases)
    e.phases.push_back(error_norms(baseline, golden, element_ranges(ph.rows, row_elements(p))));
  return e;
}

ResultRow judge(const AttnParams& p, const Tolerance& tol, const std::string& dut, std::span<const float> out,
                std::span<const double> golden, std::span<const float> baseline) {
  return judge(p, tol, dut, out, golden, baseline_errors(p, golden, baseline));
}

ResultRow judge(const AttnParams& p, const Tolerance& tol, const std::string& dut, std::span<const float> out,
                std::span<const double> golden, const BaselineErrors& base) {
  const DType dtype = p.dtype;
  ResultRow r = result_row("", dut, dtype, p.mode, tol);  // evaluate() names the scenario
  r.l2_factor = tol.l2_factor;
  r.l2_floor = tol.l2_floor;
  r.warn_l2_factor = tol.warn_l2_factor;
  r.nmse_max = tol.nmse_max;
  r.baseline_max_abs = base.max_abs;
  r.baseline_rel_l2 = base.rel_l2;
  r.baseline_mean_ulp = base.mean_ulp;

  // Each phase on its own rows: the DUT's errors and the baseline's, then the criteria over them.
  const std::int64_t row_elems = row_elements(p);
  r.threshold = tol.rtol_factor * base.max_abs + tol.atol_floor;
  const std::vector<Phase> phases = phases_of(p);
  if (base.phases.size() != phases.size())
    throw std::invalid_argument("judge: the baseline's errors have " + std::to_string(base.phases.size()) +
                                " phases, the schedule " + std::to_string(phases.size()));
  std::optional<Comparison> whole;
  if (whole_output(phases, row_elems, out.size())) whole = compare(out, golden, dtype, r.threshold);  // r.threshold is the one phase's
  std::vector<ErrorNorms> dut_phases;
  for (const Phase& ph : phases)
    dut_phases.push_back(whole ? ErrorNorms{whole->max_abs, whole->rel_l2, whole->nmse}
                               : error_norms(out, golden, element_ranges(ph.rows, row_elems)));
  std::vector<CriterionOutcome> outcomes;
  for (const Criterion& c : kCriteria) outcomes.push_back(assess(c, tol, dut_phases, base.phases));
  auto outcome = [&](CriterionId id) -> const CriterionOutcome& {
    return outcomes[static_cast<std::size_t>(&criterion(id) - kCriteria.data())];
  };
  auto phase_name = [&](const CriterionOutcome& o) { return o.applied ? phases[o.phase].name : std::string(); };
  const CriterionOutcome &max_abs = outcome(CriterionId::max_abs), &rel_l2 = outcome(CriterionId::rel_l2);
  if (max_abs.applied) {
    r.max_margin = max_abs.margin;
    r.threshold = max_abs.limit;
  }
  if (rel_l2.applied) {
    r.l2_margin = rel_l2.margin;
    r.l2_ratio = rel_l2.baseline_measured > 0 ? rel_l2.measured / rel_l2.baseline_measured : 0;
  }

  // Whole-output metrics, as recorded for every row.
  const Comparison c = whole ? *whole : compare(out, golden, dtype, r.threshold);
  r.max_abs = c.max_abs;
  r.max_rel = c.max_rel;
  r.rel_floor = c.rel_floor;
  r.mean_abs = c.mean_abs;
  r.rms = c.rms;
  r.rel_l2 = c.rel_l2;
  r.nmse = c.nmse;
  r.cosine = c.cosine;
  r.max_ulp = c.max_ulp;
  r.mean_ulp = c.mean_ulp;
  r.over_threshold = c.over_threshold;
  r.nan_count = c.nan_count;
  r.inf_count = c.inf_count;
  const Location worst = locate(p, c.nan_count + c.inf_count > 0 ? c.first_nonfinite : c.worst_index);
  r.worst_seq = worst.seq;
  r.worst_token = worst.token;
  r.worst_head = worst.head;
  r.worst_dim = worst.dim;
  r.worst_window_edge = worst.window_edge;
  r.worst_phase = r.l2_margin > r.max_margin ? phase_name(rel_l2) : phase_name(max_abs);

  // The words for each criterion over its limit, in the table's order.
  std::ostringstream why;
  auto word = [&](const CriterionOutcome& o) {
    const std::string phase = phase_name(o);
    switch (o.criterion->id) {
      case CriterionId::max_abs:
        why << "max abs error " << o.measured << " in phase " << phase << " > threshold " << o.limit << " = "
            << tol.rtol_factor << " x baseline max abs error there + atol floor " << tol.atol_floor
            << " (worst element overall " << c.max_abs << " at " << describe(worst) << "; " << c.over_threshold
            << " elements over)";
        break;
      case CriterionId::rel_l2:
        why << "relative L2 error " << o.measured << " in phase " << phase << " > " << o.limit << " = "
            << tol.l2_factor << " x the baseline's there + " << tol.l2_floor << " (" << r.l2_ratio
            << "x the baseline's)";
        break;
      case CriterionId::nmse:
        why << "NMSE " << o.measured << " in phase " << phase << " > " << o.limit << " (profile loose)";
        break;
      case CriterionId::warn_rel_l2:
        why << "warning: relative L2 error in phase " << phase << " is "
            << (o.baseline_measured > 0 ? o.measured / o.baseline_measured : 0)
            << "x the same-precision baseline's (warning above " << tol.warn_l2_factor << "x, failure above "
            << tol.l2_factor << "x): precision below a same-precision kernel's";
        break;
    }
  };
  Verdict v = Verdict::fail;
  if (c.nan_count + c.inf_count > 0) {
    why << c.nan_count << " NaN and " << c.inf_count << " Inf in the output, first at " << describe(worst)
        << " (NaN never passes; a NaN left by the poisoning is an element the DUT never wrote)";
  } else {
    v = verdict_of(outcomes);
    bool first = true;
    for (const CriterionOutcome& o : outcomes)
      if (o.over() && o.criterion->when_over == v) {
        if (!first) why << "; ";
        first = false;
        word(o);
      }
  }
  r.status = v;
  r.reason = why.str();
  return r;
}

}  // namespace swa::harness
