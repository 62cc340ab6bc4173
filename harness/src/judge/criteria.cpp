#include "swa/harness/judge/criteria.hpp"

#include <stdexcept>

namespace swa::harness {

const std::array<Criterion, 4> kCriteria = {{
    {CriterionId::max_abs, "max_abs", Verdict::fail,  //
     [](const Tolerance& t) { return t.rtol_factor > 0; },
     [](const ErrorNorms& e) { return e.max_abs; },
     [](const Tolerance& t, const ErrorNorms& b) { return t.rtol_factor * b.max_abs + t.atol_floor; }},
    {CriterionId::rel_l2, "rel_l2", Verdict::fail,  //
     [](const Tolerance& t) { return t.l2_factor > 0; },
     [](const ErrorNorms& e) { return e.rel_l2; },
     [](const Tolerance& t, const ErrorNorms& b) { return t.l2_factor * b.rel_l2 + t.l2_floor; }},
    {CriterionId::nmse, "nmse", Verdict::fail,  // an absolute bound: the loose profile's, llama.cpp's way
     [](const Tolerance& t) { return t.nmse_max > 0; },
     [](const ErrorNorms& e) { return e.nmse; },
     [](const Tolerance& t, const ErrorNorms&) { return t.nmse_max; }},
    {CriterionId::warn_rel_l2, "warn_rel_l2", Verdict::warn,  //
     [](const Tolerance& t) { return t.warn_l2_factor > 0; },
     [](const ErrorNorms& e) { return e.rel_l2; },
     [](const Tolerance& t, const ErrorNorms& b) { return t.warn_l2_factor * b.rel_l2 + t.l2_floor; }},
}};

const Criterion& criterion(CriterionId id) {
  for (const Criterion& c : kCriteria)
    if (c.id == id) return c;
  throw std::logic_error("criterion: an id without a row in kCriteria");
}

CriterionOutcome assess(const Criterion& c, const Tolerance& tolerance, std::span<const ErrorNorms> dut,
                        std::span<const ErrorNorms> baseline) {
  if (dut.empty() || dut.size() != baseline.size())
    throw std::invalid_argument("assess: " + std::to_string(dut.size()) + " phases of the DUT's errors, " +
                                std::to_string(baseline.size()) + " of the baseline's");
  CriterionOutcome o;
  o.criterion = &c;
  o.applied = c.applies(tolerance);
  if (!o.applied) return o;
  for (std::size_t k = 0; k < dut.size(); ++k) {
    const double measured = c.measure(dut[k]), limit = c.limit(tolerance, baseline[k]);
    const double margin = measured / limit;
    if (k == 0 || margin > o.margin) {
      o.phase = k;
      o.margin = margin;
      o.measured = measured;
      o.limit = limit;
      o.baseline_measured = c.measure(baseline[k]);
    }
  }
  return o;
}

Verdict verdict_of(std::span<const CriterionOutcome> outcomes) {
  Verdict v = Verdict::pass;
  for (const CriterionOutcome& o : outcomes) {
    if (!o.over()) continue;
    if (o.criterion->when_over == Verdict::fail) return Verdict::fail;
    v = o.criterion->when_over;
  }
  return v;
}

}  // namespace swa::harness
