#pragma once
// The CPU kernels use the shared host/device visibility (swa/dut/visibility.hpp).
#include "swa/dut/visibility.hpp"

namespace swa::dut::cpu {
using swa::dut::TileClass;
using swa::dut::Visibility;
}  // namespace swa::dut::cpu
