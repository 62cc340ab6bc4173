#include "swa/harness/judge/results.hpp"

#include "swa/enum_names.hpp"

namespace swa::harness {

ScenarioRow scenario_row(const Scenario& s, const AttnParams* params) {
  ScenarioRow r;
  if (params) {
    r.k_descale = params->k_descale;
    r.v_descale = params->v_descale;
    r.pool_pages = params->pool_pages;
  }
  r.id = s.id();
  r.sweep = s.sweep;
  r.params = case_columns(s);
  r.batch = static_cast<std::int64_t>(s.prompt_lens.size());
  r.tokens = s.tokens();
  return r;
}

ResultRow result_row(const std::string& scenario_id, const std::string& dut, DType dtype, RunMode mode,
                     const Tolerance& tolerance) {
  ResultRow r;
  r.scenario_id = scenario_id;
  r.dut = dut;
  r.dtype = dtype_name(dtype);
  r.mode = mode_name(mode);
  r.profile = profile_name(tolerance.profile);
  r.rtol_factor = tolerance.rtol_factor;
  r.atol_floor = tolerance.atol_floor;
  return r;
}

}  // namespace swa::harness
