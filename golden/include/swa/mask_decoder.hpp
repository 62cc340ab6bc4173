#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "swa/atb_masks.hpp"

namespace swa {

// How a tiled kernel with block size B walks the 512x512 SWA_COMPRESS mask for a window W, taking
// its block size and effective window T from one of the doc's samples (`block_rule`).
// For a query tile and a key tile at tile distance d = (q_tile - k_tile) * B:
//  - key tile after the query tile, or every pair at distance >= W: fully hidden, skipped;
//  - d == 0 (diagonal): read from the mask's top-left corner, rows [0, B) and columns [0, B);
//  - every pair at distance in [0, W): fully visible, no mask read;
//  - otherwise (window boundary): read rows [d - (W - T), d - (W - T) + B), columns [0, B).
// The boundary read is right because the compressed band satisfies
//   (d - (W - T)) + r - c < T  <=>  d + r - c < W.
struct TileWalkRule {
  std::int64_t window = 1;
  CompressGeometry geometry;  // B and T the kernel assumes
};

TileWalkRule tile_walk_rule(AtbSample block_rule, int head_size, std::int64_t window);

struct DecodedMask {
  std::int64_t n = 0;
  std::vector<std::uint8_t> visible;  // [n, n]
  // First tile read that fell outside the compressed mask (such elements decode as masked).
  bool out_of_range = false;
  std::int64_t out_of_range_row = -1, out_of_range_col = -1, out_of_range_mask_row = -1;

  bool at(std::int64_t r, std::int64_t c) const { return visible[r * n + c] != 0; }
};

// Expands the compressed mask into the [n, n] visibility a tiled kernel reads from it.
DecodedMask decode_compressed_mask(const Mask& compressed, const TileWalkRule& rule, std::int64_t n);

struct MaskDisagreement {
  bool differs = false;
  std::int64_t row = -1, col = -1;
  bool decoded_visible = false;
  bool expected_visible = false;
  std::int64_t count = 0;  // differing elements in total
  std::string detail;      // human-readable first difference, or "" when equal
};

// Decoded visibility against the canonical band i - W < j <= i.
MaskDisagreement compare_with_window(const DecodedMask& decoded, std::int64_t window);

// One cell of the mask-check grid: generator x block rule for (head_size, window).
struct MaskCheckCase {
  int head_size = 0;
  std::int64_t window = 0;
  AtbSample generator = AtbSample::python;
  AtbSample block_rule = AtbSample::python;
  CompressGeometry generated;  // B and T the mask was generated with
  CompressGeometry assumed;    // B and T the kernel assumes
  std::int64_t n = 0;          // size of the decoded square
  MaskDisagreement result;
  std::string error;           // a formula that is undefined for this head size
};

MaskCheckCase check_compressed_mask(int head_size, std::int64_t window, AtbSample generator,
                                    AtbSample block_rule);

}  // namespace swa
