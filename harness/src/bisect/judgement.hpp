#pragma once
// How sure a finding may be, given what the ablation measured. Each class says which features a
// failure of that class must need (sinks_ignored: the sinks) and which it may need (a ring-slot bug:
// the ring, decode, chunks, the window). A finding is contradicted when the failure still happens
// without a feature its class must need, or when it needs a feature its class cannot involve (a
// kernel that merely scales wrong would fail without the soft-cap too). A contradicted finding is
// an abstention: the class becomes the closest explanation, and the features the failure needs lead.
#include <string>
#include <vector>

#include "ablation.hpp"
#include "finding.hpp"
#include "swa/params.hpp"

namespace swa::harness {

// The finding as bisect reports it: `f` with its confidence lowered where the ablation contradicts
// it (then an abstention naming f as the closest explanation), and the needs sentence added.
Finding judge_finding(Finding f, const std::vector<Ablation>& ablations);

// A variant that matched the whole output (f) held to the reading of its name (readings_table), row by
// row on the same output: where that reading leaves failing rows over their limit the match is loose,
// and f says so, at most medium. Returns whether it lowered f (false too when no reading has the name).
bool hold_variant_to_its_reading(Finding& f, const std::string& variant, const AttnParams& p, const std::vector<double>& out,
                                 const std::vector<double>& ref, const std::vector<double>& row_limit);

}  // namespace swa::harness
