#pragma once
// The band a DUT attends, measured: the (left, right) bounds whose fp64 golden gives the DUT's output,
// searched around the case's own. Measured again on the case with one more key on the left (W + 1)
// and, for a two-sided window, one more on the right (R + 1), it tells how the DUT's bounds follow the
// case's: off by a constant, fixed, or the left edge measured from the right one. That is the
// experiment that separates explanations a single case cannot (at R = 1, "R ignored" and "R - 1 keys"
// give the same output).
#include <cstdint>
#include <optional>
#include <vector>

#include "finding.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/harness/case/scenario.hpp"

namespace swa::harness {

// nullopt when no band near the case's explains the output to `threshold` (or the case has a mask:
// then the mask, not the band, decides).
std::optional<WindowBand> measure_band(const Problem& pr, const std::vector<double>& out, double threshold);

// The finding from the bands measured on the case (`base`, band `case_band`), on the case with one
// more key on the left (`wider_left`), and with one more on the right (`wider_right`); nullopt when
// the measured band is the case's own.
std::optional<Finding> band_finding(WindowBand case_band, WindowBand base, std::optional<WindowBand> wider_left,
                                    std::optional<WindowBand> wider_right);

}  // namespace swa::harness
