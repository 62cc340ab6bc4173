#pragma once
// The parameters of a case, declared once (llama.cpp's vars(), CUTLASS's profiler arguments). The
// sweep file's keys, their validation and allowed values, the normalisation of parameters a mode
// does not use, the scenario ID, the /scenarios columns and their reader, and bisect's repro YAML all
// walk this table; adding a parameter is one entry here plus its semantics (problem_spec and the
// kernels). harness/README.md, "Adding a case parameter".
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "swa/harness/case/scenario.hpp"

namespace swa::harness {

enum class ColumnType { int64, text };

struct CaseParam {
  std::string_view key;     // the sweep file's key
  std::string_view id_key;  // in the ID as "<id_key>=<value>"; empty: the bare value ("fp16")
  std::string_view column;  // the /scenarios column
  ColumnType column_type;
  bool list = false;  // a list of integers: "450,131" in its column, "450-131" in the ID, [450, 131] in YAML
  // Left out of the ID and the repro while at its default, so IDs written before it existed stay.
  bool omitted_at_default = false;
  std::string allowed{};  // "prefill|chunked_prefill|decode", "[1, 1024]": for messages

  std::function<std::string(const Scenario&)> get{};  // the value as canonical text
  // Sets the value from text; the error names the allowed values. nullopt on success.
  std::function<std::optional<std::string>(Scenario&, std::string_view)> set{};
  // Whether the scenario uses the parameter at all (chunk only outside prefill, ...). A parameter that
  // does not apply is reset to its default, left out of the ID and the repro, and its text column
  // holds "none".
  std::function<bool(const Scenario&)> applies{};

  bool at_default(const Scenario& s) const;
  // Whether the ID and the repro name the parameter for this scenario: it applies, and is not omitted
  // at its default.
  bool named(const Scenario& s) const;
};

const std::vector<CaseParam>& case_params();
const CaseParam* find_case_param(std::string_view key);

// Every parameter the scenario does not use, back to its default: one case, one ID.
void normalise(Scenario& s);

// "{mode: decode, batch: [40, 9], ...}": the scenario as a sweep-file include entry.
std::string case_yaml(const Scenario& s);
// Whether a sweep must say `api: atb` to accept the case: a decode with an ATB mask (the generic API
// takes no mask tensor in decode).
bool needs_atb_api(const Scenario& s);

// Every parameter by its sweep-file key, as text ("batch" -> "450,131"): the attributes a tensor
// file (dump, bisect repro) carries, so the file says which case it holds.
std::map<std::string, std::string> case_attributes(const Scenario& s);

// Text and integer cells of a /scenarios row, one per case_params() entry.
struct CaseColumns {
  std::vector<std::string> text;
  std::vector<std::int64_t> ints;
  CaseColumns() : text(case_params().size()), ints(case_params().size()) {}
};
CaseColumns case_columns(const Scenario& s);
// The scenario back from its cells; an error names the column and the allowed values. Cells that are
// empty (a file written before the column existed), or "none" where the parameter has no such
// value, keep the default.
std::optional<std::string> scenario_from_columns(const CaseColumns& c, Scenario& s);

}  // namespace swa::harness
