#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "swa/dtype.hpp"

namespace swa {

// The mask tensors of the ATB SelfAttention operator (seeds 003/000), generated exactly as the
// doc's sample code does. Every mask is additive: 0 where a key is visible, the fill value where
// it is masked. A consumer reads "value == 0" as visible.
enum class MaskType : std::uint8_t {
  swa_norm,       // MASK_TYPE_SLIDING_WINDOW_NORM      [maxSeq, maxSeq]
  swa_compress,   // MASK_TYPE_SLIDING_WINDOW_COMPRESS  [512, 512], effective window T
  causal,         // the plain upper triangle (what SWA_NORM is for window >= seq len)
  norm_compress,  // MASK_TYPE_NORM_COMPRESS            [128, 128] triangle
};

// The doc gives every SWA mask twice, as a Python (numpy) sample and a C++ sample. For
// SWA_COMPRESS they disagree on the block size and on the effective window; both are modelled.
enum class AtbSample : std::uint8_t { python, cpp };

inline constexpr MaskType kAllMaskTypes[] = {MaskType::swa_norm, MaskType::swa_compress, MaskType::causal,
                                             MaskType::norm_compress};
inline constexpr AtbSample kAllAtbSamples[] = {AtbSample::python, AtbSample::cpp};

std::string_view mask_type_name(MaskType t);  // swa-norm | swa-compress | causal | norm-compress
std::optional<MaskType> parse_mask_type(std::string_view name);
std::string_view sample_name(AtbSample s);    // python | cpp
std::optional<AtbSample> parse_sample(std::string_view name);

inline constexpr std::int64_t kSwaCompressMaskSize = 512;
inline constexpr std::int64_t kNormCompressMaskSize = 128;

// Fill value of a masked element as the doc's generator writes it (float): fp16 -65536, bf16 1.
float atb_mask_fill(DType dtype);
// The same value after the cast to the mask tensor's dtype: fp16(-65536) is -inf, bf16(1) is 1.
float atb_mask_fill_cast(DType dtype);

// Block size and effective window T of the SWA_COMPRESS mask, by each sample's formula:
//   python: B = 128 if D <= 128 else 64;
//           T = W if W <= 3B, else 3B if W % B == 0, else 2B + W % B
//   cpp:    B = 128 if D <= 128 else (16384 / D / 16) * 16;
//           T = 2B + W % B if W > 3B, else W
// Throws when the formula is undefined (cpp with D > 1024 gives B = 0).
struct CompressGeometry {
  std::int64_t block = 0;
  std::int64_t effective_window = 0;
};
CompressGeometry compress_geometry(AtbSample sample, int head_size, std::int64_t window);

struct MaskSpec {
  MaskType type = MaskType::swa_norm;
  std::int64_t window = 1;
  std::int64_t max_seq = 1;  // used by swa_norm and causal
  int head_size = 128;       // used by swa_compress
  DType dtype = DType::fp16; // fp16 or bf16: the doc defines no other mask dtype
  AtbSample generator = AtbSample::python;
};

struct Mask {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<float> values;  // row-major, the generator's float values
  float fill = 0.f;
  std::int64_t effective_window = 0;  // T for swa_compress, W for swa_norm, 0 for triangles
  std::int64_t block = 0;             // B for swa_compress, 0 otherwise

  bool visible(std::int64_t r, std::int64_t c) const { return values[r * cols + c] == 0.f; }
};

// Throws std::invalid_argument naming the field when the spec is out of range.
Mask generate_mask(const MaskSpec& spec);

}  // namespace swa
