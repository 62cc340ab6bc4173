#pragma once
// Which keys a tile of queries sees, the way an ATB kernel is told: computed from the window, read
// from the dense SWA_NORM mask, or read tile by tile from the 512x512 SWA_COMPRESS mask with the
// golden decoder's rule (golden/mask_decoder.hpp). Positions are absolute. Shared verbatim by the
// CPU and CUDA kernels; on a GPU `p.mask` must be a device pointer.
#include <cstdint>

#include "swa/params.hpp"

namespace swa::dut {

enum class TileClass { hidden, full, partial };

class Visibility {
 public:
  SWA_HOST_DEVICE explicit Visibility(const AttnParams& p)
      : band_(p.band),
        format_(p.mask ? p.mask_format : MaskFormat::none),
        mask_(p.mask),
        mask_rows_(p.mask_rows),
        block_(p.mask_block),
        shift_(p.band.left + 1 - p.mask_effective_window) {}

  // Query rows [r0, r1) against keys [c0, c1).
  SWA_HOST_DEVICE TileClass classify(std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) const {
    const std::int64_t min_distance = r0 - (c1 - 1);  // smallest q - k in the tile
    const std::int64_t max_distance = (r1 - 1) - c0;
    const bool left_hidden = band_.left >= 0 && min_distance > band_.left;
    const bool right_hidden = band_.right >= 0 && max_distance < -band_.right;
    if (left_hidden || right_hidden) return TileClass::hidden;
    if (format_ == MaskFormat::swa_norm) return TileClass::partial;  // the dense mask is read everywhere
    const bool left_full = band_.left < 0 || max_distance <= band_.left;
    const bool right_full = band_.right < 0 || min_distance >= -band_.right;
    // The compressed mask's diagonal block is always read; with tiles not aligned to its block,
    // every tile is read, which gives the same per-element answer.
    if (format_ == MaskFormat::swa_compress && (r0 / block_ == c0 / block_ || r0 % block_ || c0 % block_))
      return TileClass::partial;
    return left_full && right_full ? TileClass::full : TileClass::partial;
  }

  SWA_HOST_DEVICE bool visible(std::int64_t r, std::int64_t c) const {
    switch (format_) {
      case MaskFormat::none: return band_visible(band_, r, c);
      case MaskFormat::swa_norm: return r < mask_rows_ && c < mask_rows_ && mask_[r * mask_rows_ + c] == 0.f;
      case MaskFormat::swa_compress: {
        const std::int64_t qt = r / block_, kt = c / block_;
        const std::int64_t row = (qt == kt ? 0 : (qt - kt) * block_ - shift_) + r % block_;
        const std::int64_t col = c % block_;
        return row >= 0 && row < mask_rows_ && mask_[row * mask_rows_ + col] == 0.f;
      }
    }
    return false;
  }

  // The element's answer in a sequence of n tokens whatever tile the kernel reads it in: for the
  // compressed mask, the tile walk over its aligned blocks (clipped at n), where blocks wholly inside
  // the window are visible without a mask read; otherwise visible().
  SWA_HOST_DEVICE bool visible_in_sequence(std::int64_t r, std::int64_t c, std::int64_t n) const {
    if (format_ != MaskFormat::swa_compress) return visible(r, c);
    const std::int64_t r0 = r / block_ * block_, c0 = c / block_ * block_;
    const std::int64_t r1 = r0 + block_ < n ? r0 + block_ : n, c1 = c0 + block_ < n ? c0 + block_ : n;
    switch (classify(r0, r1, c0, c1)) {
      case TileClass::hidden: return false;
      case TileClass::full: return true;
      case TileClass::partial: break;
    }
    return visible(r, c);
  }

  // Tiles must start at multiples of this (the compressed mask's block), or of any size when 0.
  SWA_HOST_DEVICE int required_tile() const { return format_ == MaskFormat::swa_compress ? block_ : 0; }
  SWA_HOST_DEVICE bool reads_mask() const { return format_ != MaskFormat::none; }

 private:
  WindowBand band_;
  MaskFormat format_;
  const float* mask_;
  std::int64_t mask_rows_;
  int block_;
  std::int64_t shift_;  // W - T
};

// Keys [first, end) that query rows [r0, r1) can see among the keys [keys_first, keys_end) a kernel
// holds: the band's reach, clipped to what is there. Empty (first >= end) when none.
struct KeyRange {
  std::int64_t first = 0, end = 0;
};

SWA_HOST_DEVICE constexpr KeyRange band_key_range(WindowBand band, std::int64_t r0, std::int64_t r1,
                                                  std::int64_t keys_first, std::int64_t keys_end) {
  const std::int64_t lo = band_first_key(band, r0);
  const std::int64_t hi = band_end_key(band, r1 - 1, keys_end);
  return {lo > keys_first ? lo : keys_first, hi};
}

}  // namespace swa::dut
