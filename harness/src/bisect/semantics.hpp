#pragma once
// Words for the score semantics of modern layers, each from a measurement on the recovered weights,
// not from a list of bugs:
//  - sinks: the sink logit the DUT's weights imply (the mass they leave out), per fitted row, against
//    the row's own sink, every other head's, the sink scaled like a score, the sink capped, and none;
//  - soft-cap: which score -> weight curve the weights follow (capped, uncapped, capped before the
//    scale), and by how much they leave the capped one;
//  - FP8 KV: rows that see a single key output that key's V as the DUT read it, which is compared
//    with every reading the spec leaves a kernel to get wrong: the rounding (nearest-even,
//    nearest-away, toward zero), the descale (V's or K's), the format (its own or the other) and
//    how the descale is applied (x / d encoded then times d, or x * d encoded then divided by d).
#include <optional>
#include <vector>

#include "finding.hpp"
#include "recover.hpp"

namespace swa::harness {

// rows: well-fitted recovered rows (small residual). nullopt when the case has no sinks, the fit
// cannot tell, or the sinks are right.
std::optional<Finding> sink_finding(const std::vector<const RecoveredRow*>& rows, const AttnParams& p);
std::optional<Finding> softcap_finding(const std::vector<const RecoveredRow*>& rows, const AttnParams& p);
// Only some dims of the output fail (the same contiguous block in every failing row; a head-size
// special case, a tail of dims not written or not computed); nullopt otherwise.
std::optional<Finding> dims_finding(const AttnParams& p, const std::vector<double>& out, const std::vector<double>& ref,
                                    const std::vector<double>& row_limit);
// From the single-key rows over `limit` (pr's float V, out and ref [nTokens, Hq, D]); nullopt when the
// case is not FP8 or has no such row.
std::optional<Finding> fp8_value_finding(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                                         const std::vector<double>& row_limit);

}  // namespace swa::harness
