// The verdict's criteria table on its own: each criterion against its limit, the worst phase, a
// criterion turned off, warn only where nothing fails.
#define BOOST_TEST_MODULE verdict_criteria
#include <boost/test/unit_test.hpp>

#include <vector>

#include <bit>
#include <cstdint>

#include "swa/dtype.hpp"
#include "swa/harness/judge/criteria.hpp"
#include "swa/harness/judge/evaluate.hpp"

using namespace swa::harness;

namespace {

Tolerance every_criterion() {
  Tolerance t;
  t.rtol_factor = 2;
  t.atol_floor = 1e-6;
  t.l2_factor = 3;
  t.l2_floor = 1e-7;
  t.warn_l2_factor = 1.5;
  t.nmse_max = 1e-4;
  return t;
}

const std::vector<ErrorNorms> kBaseline = {{1e-3, 1e-3, 1e-6}, {2e-3, 2e-3, 4e-6}};

std::vector<CriterionOutcome> assess_all(const Tolerance& t, const std::vector<ErrorNorms>& dut) {
  std::vector<CriterionOutcome> o;
  for (const Criterion& c : kCriteria) o.push_back(assess(c, t, dut, kBaseline));
  return o;
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_id_has_one_row_and_only_warn_rel_l2_warns) {
  for (CriterionId id : {CriterionId::max_abs, CriterionId::rel_l2, CriterionId::nmse, CriterionId::warn_rel_l2}) {
    BOOST_TEST((criterion(id).id == id));
    BOOST_TEST((criterion(id).when_over == (id == CriterionId::warn_rel_l2 ? Verdict::warn : Verdict::fail)));
  }
}

BOOST_AUTO_TEST_CASE(limits_scale_with_the_baseline_of_the_same_phase) {
  const Tolerance t = every_criterion();
  BOOST_TEST(criterion(CriterionId::max_abs).limit(t, kBaseline[1]) == 2 * 2e-3 + 1e-6);
  BOOST_TEST(criterion(CriterionId::rel_l2).limit(t, kBaseline[1]) == 3 * 2e-3 + 1e-7);
  BOOST_TEST(criterion(CriterionId::warn_rel_l2).limit(t, kBaseline[1]) == 1.5 * 2e-3 + 1e-7);
  BOOST_TEST(criterion(CriterionId::nmse).limit(t, kBaseline[1]) == 1e-4);  // absolute
}

BOOST_AUTO_TEST_CASE(an_output_as_good_as_the_baseline_passes) {
  BOOST_TEST((verdict_of(assess_all(every_criterion(), kBaseline)) == Verdict::pass));
}

BOOST_AUTO_TEST_CASE(at_the_limit_passes_and_past_it_fails) {
  const Tolerance t = every_criterion();
  const Criterion& c = criterion(CriterionId::max_abs);
  const double limit = c.limit(t, kBaseline[0]);
  std::vector<ErrorNorms> dut = kBaseline;
  dut[0].max_abs = limit;
  BOOST_TEST(!assess(c, t, dut, kBaseline).over());
  dut[0].max_abs = limit * (1 + 1e-12);
  BOOST_TEST(assess(c, t, dut, kBaseline).over());
  BOOST_TEST((verdict_of(assess_all(t, dut)) == Verdict::fail));
}

BOOST_AUTO_TEST_CASE(the_worst_phase_is_found_against_its_own_baseline) {
  // Phase 1 has the larger error, phase 0 the larger margin: its baseline is half phase 1's.
  std::vector<ErrorNorms> dut = {{3e-3, 1e-3, 1e-6}, {4e-3, 2e-3, 4e-6}};
  const CriterionOutcome o = assess(criterion(CriterionId::max_abs), every_criterion(), dut, kBaseline);
  BOOST_TEST(o.phase == 0u);
  BOOST_TEST(o.measured == 3e-3);
  BOOST_TEST(o.baseline_measured == 1e-3);
  BOOST_TEST(o.margin == 3e-3 / (2e-3 + 1e-6));
  BOOST_TEST(o.over());
}

BOOST_AUTO_TEST_CASE(a_factor_of_zero_turns_its_criterion_off) {
  Tolerance t = every_criterion();
  t.rtol_factor = 0;
  std::vector<ErrorNorms> dut = kBaseline;
  dut[1].max_abs = 1.0;  // far past any max-abs limit
  const CriterionOutcome o = assess(criterion(CriterionId::max_abs), t, dut, kBaseline);
  BOOST_TEST(!o.applied);
  BOOST_TEST(!o.over());
  BOOST_TEST((verdict_of(assess_all(t, dut)) == Verdict::pass));
}

BOOST_AUTO_TEST_CASE(nmse_fails_on_its_absolute_bound) {
  std::vector<ErrorNorms> dut = kBaseline;
  dut[1].nmse = 2e-4;
  const auto outcomes = assess_all(every_criterion(), dut);
  BOOST_TEST((verdict_of(outcomes) == Verdict::fail));
  BOOST_TEST(outcomes[2].over());
  BOOST_TEST(outcomes[2].phase == 1u);
}

BOOST_AUTO_TEST_CASE(warn_only_where_nothing_fails) {
  std::vector<ErrorNorms> dut = kBaseline;
  dut[1].rel_l2 = 2 * kBaseline[1].rel_l2;  // past warn (1.5x), within fail (3x)
  BOOST_TEST((verdict_of(assess_all(every_criterion(), dut)) == Verdict::warn));
  dut[0].max_abs = 1.0;
  BOOST_TEST((verdict_of(assess_all(every_criterion(), dut)) == Verdict::fail));
}

BOOST_AUTO_TEST_CASE(phases_must_match) {
  const std::vector<ErrorNorms> one = {kBaseline[0]};
  BOOST_CHECK_THROW(assess(kCriteria[0], every_criterion(), one, kBaseline), std::invalid_argument);
  BOOST_CHECK_THROW(assess(kCriteria[0], every_criterion(), {}, {}), std::invalid_argument);
}

// NaN provenance: the output's fill is told from a NaN a kernel computed by its bits, after the same
// read-back as run_dut's (the dtype, to float, to double).
BOOST_AUTO_TEST_CASE(the_output_fill_is_told_from_a_computed_nan_by_its_bits) {
  for (swa::DType dt : swa::kAllDTypes) {
    const std::uint32_t fill = output_fill_bits(dt);
    // Nine elements: load_all's 8-wide path and its tail.
    const std::vector<std::uint32_t> wide(9, fill);
    const std::vector<std::uint16_t> narrow(9, static_cast<std::uint16_t>(fill));
    const void* stored = swa::dtype_bytes(dt) == 4 ? static_cast<const void*>(wide.data()) : narrow.data();
    const std::vector<float> read = swa::load_all(dt, stored, 9);
    for (float x : read) BOOST_TEST(is_output_fill(dt, x), swa::dtype_name(dt));
    // x86's and CUDA's default NaN, NumPy's nan, each stored in the dtype.
    for (const std::uint32_t computed : {0xffc00000u, 0x7fc00000u}) {
      std::uint32_t bits = 0;
      swa::store_as(dt, std::bit_cast<float>(computed), &bits);
      BOOST_TEST(!is_output_fill(dt, swa::load_from(dt, &bits)), swa::dtype_name(dt) << " " << std::hex << computed);
    }
    BOOST_TEST(!is_output_fill(dt, 0.0));
  }
}
