#pragma once
// Register layouts of the warp-wide tensor-core instruction mma.sync.m16n8k16.row.col (PTX ISA,
// "Matrix fragments for mma.m16n8k16 with floating point type"). Lane = 4 * group + thread, group
// = lane / 4 in [0, 8), thread = lane % 4. The kernel addresses shared memory only through these,
// and dut/cuda/tests checks the register reuse it relies on (S accumulators becoming P operands).
#include "swa/host_device.hpp"

namespace swa::dut::cuda {

struct FragCoord {
  int row, col;
};

// A (16 x 16, row-major): element e in [0, 8) of a lane; elements 2i and 2i+1 share a 32-bit register.
SWA_HOST_DEVICE constexpr FragCoord mma_a_coord(int lane, int e) {
  return {lane / 4 + 8 * ((e / 2) % 2), 2 * (lane % 4) + e % 2 + 8 * (e / 4)};
}

// B (16 x 8, "col": k along rows): element e in [0, 4); row = k, col = n.
SWA_HOST_DEVICE constexpr FragCoord mma_b_coord(int lane, int e) {
  return {2 * (lane % 4) + e % 2 + 8 * (e / 2), lane / 4};
}

// C/D (16 x 8, fp32): element e in [0, 4).
SWA_HOST_DEVICE constexpr FragCoord mma_c_coord(int lane, int e) {
  return {lane / 4 + 8 * (e / 2), 2 * (lane % 4) + e % 2};
}

// The A element that the kernel fills from the accumulators of two adjacent n8 blocks: A element e
// of k16 block kk is accumulator element c_element(e) of n8 block 2 * kk + c_block(e).
SWA_HOST_DEVICE constexpr int p_source_block(int e) { return e / 4; }
SWA_HOST_DEVICE constexpr int p_source_element(int e) { return e % 4; }

}  // namespace swa::dut::cuda
