#pragma once
// Which keys a tile of queries sees, the way an ATB kernel is told: computed from the window,
// read from the dense SWA_NORM mask, or read tile by tile from the 512x512 SWA_COMPRESS mask with
// the golden decoder's rule (golden/mask_decoder.hpp). Positions are absolute.
#include <cstdint>

#include "swa/params.hpp"

namespace swa::dut::cpu {

enum class TileClass { hidden, full, partial };

class Visibility {
 public:
  explicit Visibility(const AttnParams& p);

  // Query rows [r0, r1) against keys [c0, c1).
  TileClass classify(std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) const;
  bool visible(std::int64_t r, std::int64_t c) const;
  // Tiles must start at multiples of this (the compressed mask's block), or of any size when 0.
  int required_tile() const { return format_ == MaskFormat::swa_compress ? block_ : 0; }

 private:
  WindowBand band_;
  MaskFormat format_;
  const float* mask_;
  std::int64_t mask_rows_;
  int block_;
  std::int64_t shift_;  // W - T
};

}  // namespace swa::dut::cpu
