#pragma once
// The same-precision baseline (golden/baseline.hpp) as a DUT, the reference backend until the
// optimised CPU kernels exist. It ignores the schedule: its first call writes every row, its cache
// stays empty, and decode steps have nothing left to do.
#include <memory>

#include "swa/dut/dut.hpp"

namespace swa::dut {

std::unique_ptr<Dut> make_baseline_dut();

}  // namespace swa::dut
