#include "swa/atb_masks.hpp"

#include <stdexcept>
#include "swa/enum_names.hpp"

namespace swa {

SWA_ENUM_NAMES(MaskType, mask_type_name, parse_mask_type, kAllMaskTypes,
               {MaskType::swa_norm, "swa-norm"}, {MaskType::swa_compress, "swa-compress"},
               {MaskType::causal, "causal"}, {MaskType::norm_compress, "norm-compress"})

std::string_view sample_name(AtbSample s) { return s == AtbSample::python ? "python" : "cpp"; }

std::optional<AtbSample> parse_sample(std::string_view name) { return parse_enum(name, kAllAtbSamples, sample_name); }

float atb_mask_fill(DType dtype) {
  if (dtype == DType::fp16) return -65536.0f;
  if (dtype == DType::bf16) return 1.0f;
  throw std::invalid_argument("mask dtype must be fp16|bf16 (the ATB doc defines SWA masks for no other), got " +
                              std::string(dtype_name(dtype)));
}

float atb_mask_fill_cast(DType dtype) { return round_to(dtype, atb_mask_fill(dtype)); }

CompressGeometry compress_geometry(AtbSample sample, int head_size, std::int64_t window) {
  if (head_size < 1) throw std::invalid_argument("head_size must be >= 1");
  if (window < 1) throw std::invalid_argument("window must be >= 1");
  CompressGeometry g;
  if (sample == AtbSample::python) {
    g.block = head_size <= 128 ? 128 : 64;
    if (window <= 3 * g.block) g.effective_window = window;
    else if (window % g.block == 0) g.effective_window = 3 * g.block;
    else g.effective_window = 2 * g.block + window % g.block;
  } else {
    g.block = head_size > 128 ? (16384 / head_size / 16 * 16) : 128;
    if (g.block == 0)
      throw std::invalid_argument("the doc's C++ SWA_COMPRESS sample divides by zero for head_size " +
                                  std::to_string(head_size) + " (> 1024): block size 16384/D/16*16 is 0");
    g.effective_window = window > 3 * g.block ? 2 * g.block + window % g.block : window;
  }
  return g;
}

namespace {

// np.triu(fill, 1) + np.tril(fill, -k): the numpy sample's construction, element by element.
// Both terms can cover one element only for k <= 0, which is then filled twice.
float numpy_band_value(std::int64_t r, std::int64_t c, std::int64_t k, float fill) {
  float v = 0.f;
  if (c - r >= 1) v += fill;
  if (c - r <= -k) v += fill;
  return v;
}

Mask numpy_band_mask(std::int64_t n, std::int64_t k, float fill) {
  Mask m;
  m.rows = m.cols = n;
  m.fill = fill;
  m.values.resize(static_cast<std::size_t>(n * n));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < n; ++c) m.values[r * n + c] = numpy_band_value(r, c, k, fill);
  return m;
}

// The C++ sample's loop: fill everything, then zero j in [i - w + 1, i] (unsigned arithmetic as
// written in the doc). The doc's NORM sample indexes rows with SWA_COMPRESS_MASK_SIZE, a typo for
// SWA_MASK_SIZE; the intended row stride `n` is used here.
Mask loop_band_mask(std::int64_t n, std::int64_t w, float fill) {
  Mask m;
  m.rows = m.cols = n;
  m.fill = fill;
  m.values.assign(static_cast<std::size_t>(n * n), fill);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t offset = i >= w ? i - w + 1 : 0;
    for (std::int64_t j = offset; j < i + 1; ++j) m.values[i * n + j] = 0.f;
  }
  return m;
}

Mask triangle(std::int64_t n, float fill) {
  Mask m;
  m.rows = m.cols = n;
  m.fill = fill;
  m.values.assign(static_cast<std::size_t>(n * n), 0.f);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = r + 1; c < n; ++c) m.values[r * n + c] = fill;
  return m;
}

}  // namespace

Mask generate_mask(const MaskSpec& spec) {
  const float fill = atb_mask_fill(spec.dtype);
  if (spec.window < 1) throw std::invalid_argument("window must be >= 1, got " + std::to_string(spec.window));
  switch (spec.type) {
    case MaskType::swa_norm: {
      if (spec.max_seq < 1) throw std::invalid_argument("max_seq must be >= 1");
      Mask m = spec.generator == AtbSample::python ? numpy_band_mask(spec.max_seq, spec.window, fill)
                                                   : loop_band_mask(spec.max_seq, spec.window, fill);
      m.effective_window = spec.window;
      return m;
    }
    case MaskType::swa_compress: {
      const CompressGeometry g = compress_geometry(spec.generator, spec.head_size, spec.window);
      Mask m = spec.generator == AtbSample::python
                   ? numpy_band_mask(kSwaCompressMaskSize, g.effective_window, fill)
                   : loop_band_mask(kSwaCompressMaskSize, g.effective_window, fill);
      m.effective_window = g.effective_window;
      m.block = g.block;
      return m;
    }
    case MaskType::causal:
      if (spec.max_seq < 1) throw std::invalid_argument("max_seq must be >= 1");
      return triangle(spec.max_seq, fill);
    case MaskType::norm_compress: return triangle(kNormCompressMaskSize, fill);
  }
  throw std::invalid_argument("unknown mask type");
}

}  // namespace swa
