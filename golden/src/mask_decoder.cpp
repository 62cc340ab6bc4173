#include "swa/mask_decoder.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "swa/window.hpp"

namespace swa {

TileWalkRule tile_walk_rule(AtbSample block_rule, int head_size, std::int64_t window) {
  return {window, compress_geometry(block_rule, head_size, window)};
}

DecodedMask decode_compressed_mask(const Mask& compressed, const TileWalkRule& rule, std::int64_t n) {
  const std::int64_t B = rule.geometry.block;
  const std::int64_t W = rule.window;
  const std::int64_t shift = W - rule.geometry.effective_window;
  DecodedMask out;
  out.n = n;
  out.visible.assign(static_cast<std::size_t>(n * n), 0);
  const std::int64_t tiles = (n + B - 1) / B;
  for (std::int64_t qt = 0; qt < tiles; ++qt) {
    const std::int64_t r0 = qt * B, r1 = std::min(n, r0 + B);
    for (std::int64_t kt = 0; kt <= qt; ++kt) {
      const std::int64_t c0 = kt * B, c1 = std::min(n, c0 + B);
      const std::int64_t min_distance = r0 - (c1 - 1);
      const std::int64_t max_distance = (r1 - 1) - c0;
      if (min_distance >= W) continue;  // fully hidden: skipped
      if (qt != kt && min_distance >= 0 && max_distance < W) {
        for (std::int64_t r = r0; r < r1; ++r) std::fill(&out.visible[r * n + c0], &out.visible[r * n + c1], 1);
        continue;
      }
      const std::int64_t mask_row0 = qt == kt ? 0 : (qt - kt) * B - shift;
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t mr = mask_row0 + (r - r0);
        for (std::int64_t c = c0; c < c1; ++c) {
          const std::int64_t mc = c - c0;
          if (mr < 0 || mr >= compressed.rows || mc >= compressed.cols) {
            if (!out.out_of_range) {
              out.out_of_range = true;
              out.out_of_range_row = r;
              out.out_of_range_col = c;
              out.out_of_range_mask_row = mr;
            }
            continue;
          }
          out.visible[r * n + c] = compressed.visible(mr, mc) ? 1 : 0;
        }
      }
    }
  }
  return out;
}

MaskDisagreement compare_with_window(const DecodedMask& decoded, std::int64_t window) {
  const WindowBand band = band_from_window(window, WindowConvention::keys_including_self);
  MaskDisagreement d;
  for (std::int64_t r = 0; r < decoded.n; ++r)
    for (std::int64_t c = 0; c < decoded.n; ++c) {
      const bool expected = band_visible(band, r, c);
      if (decoded.at(r, c) == expected) continue;
      if (!d.differs) {
        d.differs = true;
        d.row = r;
        d.col = c;
        d.decoded_visible = decoded.at(r, c);
        d.expected_visible = expected;
      }
      ++d.count;
    }
  if (d.differs) {
    std::ostringstream s;
    s << "first at (q=" << d.row << ", k=" << d.col << ", distance " << d.row - d.col << "): decoded "
      << (d.decoded_visible ? "visible" : "masked") << ", window says " << (d.expected_visible ? "visible" : "masked")
      << "; " << d.count << " elements differ";
    if (decoded.out_of_range)
      s << "; tile read outside the 512-row mask (mask row " << decoded.out_of_range_mask_row << " for q="
        << decoded.out_of_range_row << ")";
    d.detail = s.str();
  }
  return d;
}

MaskCheckCase check_compressed_mask(int head_size, std::int64_t window, AtbSample generator, AtbSample block_rule) {
  MaskCheckCase c;
  c.head_size = head_size;
  c.window = window;
  c.generator = generator;
  c.block_rule = block_rule;
  try {
    c.generated = compress_geometry(generator, head_size, window);
    c.assumed = compress_geometry(block_rule, head_size, window);
  } catch (const std::invalid_argument& e) {
    c.error = e.what();
    return c;
  }
  MaskSpec spec;
  spec.type = MaskType::swa_compress;
  spec.window = window;
  spec.head_size = head_size;
  spec.dtype = DType::fp16;
  spec.generator = generator;
  const Mask mask = generate_mask(spec);
  // Long enough for every tile class to occur: boundary tiles start once q >= W, plus tiles beyond.
  c.n = window + 4 * c.assumed.block;
  const TileWalkRule rule{window, c.assumed};
  c.result = compare_with_window(decode_compressed_mask(mask, rule, c.n), window);
  return c;
}

}  // namespace swa
