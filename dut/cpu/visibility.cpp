#include "visibility.hpp"

namespace swa::dut::cpu {

Visibility::Visibility(const AttnParams& p)
    : band_(p.band),
      format_(p.mask ? p.mask_format : MaskFormat::none),
      mask_(p.mask),
      mask_rows_(p.mask_rows),
      block_(p.mask_block),
      shift_(p.band.left + 1 - p.mask_effective_window) {}

TileClass Visibility::classify(std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) const {
  const std::int64_t min_distance = r0 - (c1 - 1);  // smallest q - k in the tile
  const std::int64_t max_distance = (r1 - 1) - c0;
  const bool left_hidden = band_.left >= 0 && min_distance > band_.left;
  const bool right_hidden = band_.right >= 0 && max_distance < -band_.right;
  if (left_hidden || right_hidden) return TileClass::hidden;
  if (format_ == MaskFormat::swa_norm) return TileClass::partial;  // the dense mask is read everywhere
  const bool left_full = band_.left < 0 || max_distance <= band_.left;
  const bool right_full = band_.right < 0 || min_distance >= -band_.right;
  if (format_ == MaskFormat::swa_compress && r0 / block_ == c0 / block_) return TileClass::partial;  // diagonal
  return left_full && right_full ? TileClass::full : TileClass::partial;
}

bool Visibility::visible(std::int64_t r, std::int64_t c) const {
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

}  // namespace swa::dut::cpu
