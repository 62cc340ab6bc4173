#include "swa/dut/mutant_dut.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "swa/dut/fp8.hpp"
#include "swa/dut/visibility.hpp"
#include "swa/enum_names.hpp"

namespace swa::dut {

SWA_ENUM_NAMES(Fault, fault_name, parse_fault, kAllFaults,
               {Fault::none, "none"}, {Fault::window_plus_one, "window_plus_one"},
               {Fault::window_minus_one, "window_minus_one"},
               {Fault::ring_slot_off_by_one, "ring_slot_off_by_one"},
               {Fault::stale_slot_after_wrap, "stale_slot_after_wrap"},
               {Fault::gqa_modulo_mapping, "gqa_modulo_mapping"},
               {Fault::fp16_pv_accumulation, "fp16_pv_accumulation"},
               {Fault::fp16_pv_decode_only, "fp16_pv_decode_only"},
               {Fault::no_max_subtraction, "no_max_subtraction"},
               {Fault::cache_slot_shifted, "cache_slot_shifted"},
               {Fault::p_low_precision, "p_low_precision"},
               {Fault::scores_low_precision, "scores_low_precision"},
               {Fault::additive_mask, "additive_mask"},
               {Fault::mask_block_cpp_rule, "mask_block_cpp_rule"},
               {Fault::none_reversed, "none_reversed"}, {Fault::sink_in_numerator, "sink_in_numerator"},
               {Fault::softcap_after_mask, "softcap_after_mask"},
               {Fault::window_right_off_by_one, "window_right_off_by_one"},
               {Fault::fp8_no_saturation, "fp8_no_saturation"},
               {Fault::fp8_descale_twice, "fp8_descale_twice"},
               {Fault::page_table_off_by_one, "page_table_off_by_one"},
               {Fault::page_freed_early, "page_freed_early"},
               {Fault::recycled_page_read, "recycled_page_read"},
               {Fault::sink_through_softcap, "sink_through_softcap"},
               {Fault::softcap_right_after_mask, "softcap_right_after_mask"},
               {Fault::sink_ignored_two_sided, "sink_ignored_two_sided"},
               {Fault::sink_scaled_by_k_descale, "sink_scaled_by_k_descale"},
               {Fault::softcap_before_k_descale, "softcap_before_k_descale"},
               {Fault::v_read_with_k_descale, "v_read_with_k_descale"},
               {Fault::gqa_group_from_kv_heads, "gqa_group_from_kv_heads"},
               {Fault::length_table_of_4, "length_table_of_4"},
               {Fault::first_length_for_all, "first_length_for_all"},
               {Fault::window_from_chunk, "window_from_chunk"},
               {Fault::window_from_page_size, "window_from_page_size"})
std::string fault_choices() { return enum_choices(kAllFaults, fault_name); }

namespace {

class MutantDut final : public Dut {
 public:
  explicit MutantDut(Fault fault) : fault_(fault) {}

  std::string name() const override { return "mutant:" + std::string(fault_name(fault_)); }

  Support supports(const AttnParams&) const override { return Support::yes(); }

  Status prefill(const AttnParams& p) override {
    forget_rows();
    reading_paged_ = false;
    in_chunk_call_ = false;
    for (int b = 0; b < p.batch; ++b)
      for (std::int64_t i = (sequence_length_ = p.seq_lens[b], 0); i < rows_of(p, b); ++i)
        for (int h = 0; h < p.heads_q; ++h) {
          keys_.clear();
          bias_.clear();
          for (std::int64_t j = 0; j < p.seq_lens[b]; ++j)
            if (visible(p, i, j)) {
              keys_.push_back({input_k(p, b, j, h), input_v(p, b, j, h)});
              if (adds_mask(p)) bias_.push_back(mask_value(p, i, j));
            } else if (caps_hidden_keys(p) || (caps_hidden_right_keys(p) && j > i)) {
              keys_.push_back({input_k(p, b, j, h), input_v(p, b, j, h), true});
            }
          attend(p, b, i, h);
        }
    return Status::success();
  }

  // The rows prefill computes of sequence b (the rest stay as the harness poisoned them).
  std::int64_t rows_of(const AttnParams& p, int b) const {
    if (fault_ == Fault::length_table_of_4 && b >= 4) return std::min(p.seq_lens[b % 4], p.seq_lens[b]);
    if (fault_ == Fault::first_length_for_all) return std::min(p.seq_lens[0], p.seq_lens[b]);
    return p.seq_lens[b];
  }

  Status chunked_prefill(const AttnParams& p, KvCache& cache, int chunk_index) override {
    forget_rows();
    in_chunk_call_ = true;
    for (int b = 0; b < p.batch; ++b) {
      const std::int64_t s = chunk_begin(p, b, chunk_index), e = chunk_end(p, b, chunk_index);
      for (std::int64_t i = s; i < e; ++i)
        for (int h = 0; h < p.heads_q; ++h) {
          gather_cache(p, cache, b, i, h);
          for (std::int64_t j = s; j < e; ++j)
            if (j <= i && visible(p, i, j)) keys_.push_back({input_k(p, b, j, h), input_v(p, b, j, h)});
            else if (caps_hidden_keys(p)) keys_.push_back({input_k(p, b, j, h), input_v(p, b, j, h), true});
          attend(p, b, i, h);
        }
      write_cache(p, cache, b, s, e);
    }
    for (int b = 0; b < p.batch; ++b)
      if (chunk_begin(p, b, chunk_index) < chunk_end(p, b, chunk_index)) free_early(p, cache, b, chunk_end(p, b, chunk_index));
    return Status::success();
  }

  Status decode_step(const AttnParams& p, KvCache& cache, int step) override {
    forget_rows();
    decoding_ = true;
    in_chunk_call_ = false;
    for (int b = 0; b < p.batch; ++b) {
      const std::int64_t i = prompt_len(p, b) + step;
      write_cache(p, cache, b, i, i + 1);
      for (int h = 0; h < p.heads_q; ++h) {
        gather_cache(p, cache, b, i, h);
        attend(p, b, i, h);
      }
    }
    for (int b = 0; b < p.batch; ++b) free_early(p, cache, b, prompt_len(p, b) + step + 1);
    return Status::success();
  }

 private:
  // page_freed_early: after a call that wrote up to row e, frees the pages dead to query e + 1, one
  // query early (the harness frees those dead to query e after the call).
  void free_early(const AttnParams& p, KvCache& cache, int b, std::int64_t e) const {
    if (fault_ == Fault::page_freed_early && cache.paged())
      free_pages_below(cache, b, pages_dead_before(p.band, e + 1, cache.page_size));
  }

  struct Key {
    const unsigned char* k;
    const unsigned char* v;
    bool hidden = false;  // computed, then "masked" to -inf before a cap turned it into -cap
    bool cached = false;  // k and v point into the KV cache (FP8 codes with an FP8 KV format)
  };

  bool fp8(const AttnParams& p) const { return is_fp8(p.kv_format); }

  std::uint8_t encode(const AttnParams& p, float x, float descale) const {
    return fp8_from_float(x / descale, is_e4m3(p.kv_format), fault_ != Fault::fp8_no_saturation);
  }
  float decode(const AttnParams& p, std::uint8_t code, float descale) const {
    const float once = fp8_to_float(code, is_e4m3(p.kv_format)) * descale;
    return fault_ == Fault::fp8_descale_twice ? once * descale : once;
  }

  // Element d of a key's K (value = false) or V row, as the kernel reads it.
  float kv_element(const AttnParams& p, const Key& key, bool value, int d) const {
    const unsigned char* row = value ? key.v : key.k;
    const float descale = value ? p.v_descale : p.k_descale;
    const float read_descale = value && fault_ == Fault::v_read_with_k_descale ? p.k_descale : descale;
    if (key.cached && fp8(p)) return decode(p, row[d], read_descale);
    const float x = load_from(p.dtype, row + d * dtype_bytes(p.dtype));
    return fp8(p) ? decode(p, encode(p, x, descale), read_descale) : x;
  }

  bool caps_hidden_keys(const AttnParams& p) const { return fault_ == Fault::softcap_after_mask && p.softcap > 0.f; }
  bool caps_hidden_right_keys(const AttnParams& p) const {
    return fault_ == Fault::softcap_right_after_mask && p.softcap > 0.f && p.band.right != 0;
  }
  // The paged-FP8 faults: in a kernel's path that reads FP8 codes from a page pool.
  bool paged_fp8_fault(const AttnParams& p, Fault f) const { return fault_ == f && reading_paged_ && fp8(p); }

  bool adds_mask(const AttnParams& p) const {
    return fault_ == Fault::additive_mask && p.mask && p.mode == RunMode::prefill;
  }

  // The ATB mask's value for (query i, key j), read as a kernel that adds it would read it.
  float mask_value(const AttnParams& p, std::int64_t i, std::int64_t j) const {
    if (p.mask_format == MaskFormat::swa_norm) return p.mask[i * p.mask_rows + j];
    const std::int64_t block = p.mask_block, qt = i / block, kt = j / block;
    const std::int64_t shift = p.band.left + 1 - p.mask_effective_window;
    const std::int64_t row = (qt == kt ? 0 : (qt - kt) * block - shift) + i % block;
    return row >= 0 && row < p.mask_rows ? p.mask[row * p.mask_rows + j % block] : 0.f;
  }

  bool visible(const AttnParams& p, std::int64_t i, std::int64_t j) const {
    if (adds_mask(p)) return j <= i;  // every causal key, the mask added to its score
    if (fault_ == Fault::mask_block_cpp_rule && p.mask && p.mask_format == MaskFormat::swa_compress &&
        p.mode == RunMode::prefill) {
      // The doc's C++ sample: block 16384/D/16*16 above D = 128, and its effective-window rule.
      AttnParams other = p;
      other.mask_block = p.head_size > 128 ? 16384 / p.head_size / 16 * 16 : 128;
      const std::int64_t w = p.band.left + 1, b = other.mask_block;
      other.mask_effective_window = w > 3 * b ? 2 * b + w % b : w;
      return Visibility(other).visible_in_sequence(i, j, sequence_length_);
    }
    WindowBand band = p.band;
    if (band.left >= 0 && fault_ == Fault::window_from_chunk && in_chunk_call_ && p.chunk > 0) band.left = p.chunk - 1;
    if (band.left >= 0 && fault_ == Fault::window_from_page_size && reading_paged_) band.left = p.page_size - 1;
    if (band.left >= 0 && fault_ == Fault::window_plus_one) band.left += 1;
    if (band.right > 0 && fault_ == Fault::window_right_off_by_one) band.right += 1;
    if (band.left >= 0 && fault_ == Fault::window_minus_one) {
      if (band.left == 0) return false;  // W = 1 becomes no key at all
      band.left -= 1;
    }
    return band_visible(band, i, j);
  }

  int kv_head(const AttnParams& p, int h) const {
    if (fault_ == Fault::gqa_modulo_mapping) return h % p.heads_kv;
    if (fault_ == Fault::gqa_group_from_kv_heads) return std::min(h / p.heads_kv, p.heads_kv - 1);
    return kv_head_for(h, p.heads_q, p.heads_kv);
  }

  const unsigned char* at(const AttnParams& p, const void* base, std::int64_t row_stride, std::int64_t head_stride,
                          std::int64_t row, int head) const {
    return static_cast<const unsigned char*>(base) + (row * row_stride + head * head_stride) * dtype_bytes(p.dtype);
  }
  const unsigned char* input_k(const AttnParams& p, int b, std::int64_t j, int h) const {
    return at(p, p.k, p.k_row_stride, p.k_head_stride, p.seq_offsets[b] + j, kv_head(p, h));
  }
  const unsigned char* input_v(const AttnParams& p, int b, std::int64_t j, int h) const {
    return at(p, p.v, p.v_row_stride, p.v_head_stride, p.seq_offsets[b] + j, kv_head(p, h));
  }

  void gather_cache(const AttnParams& p, const KvCache& cache, int b, std::int64_t i, int h) {
    keys_.clear();
    reading_paged_ = cache.paged();
    for (std::int64_t slot = 0; slot < cache.slots; ++slot) {
      const std::int64_t pos = cache.position_in(b, shifted_back(cache, slot));
      if (pos < 0 || (!visible(p, i, pos) && !caps_hidden_keys(p))) continue;
      const int g = kv_head(p, h);
      if (fault_ == Fault::recycled_page_read && cache.paged() && decoding_ && pos == i) {
        const std::size_t row = static_cast<std::size_t>(g) * p.head_size * cache.element_bytes();
        keys_.push_back({&unwritten_k_[row], &unwritten_v_[row], !visible(p, i, pos), true});
        continue;
      }
      const std::optional<std::size_t> off = read_offset(cache, b, slot, g);
      if (!off) continue;
      keys_.push_back({&cache.k[*off], &cache.v[*off], !visible(p, i, pos), true});
    }
  }

  // Where the kernel reads (slot, head) of sequence b; nullopt when its page lookup finds no page.
  std::optional<std::size_t> read_offset(const KvCache& cache, int b, std::int64_t slot, int g) const {
    if (fault_ != Fault::page_table_off_by_one || !cache.paged()) return cache.offset(b, slot, g);
    const std::int64_t logical = (slot + 1) / cache.page_size;
    const std::int32_t page = logical < cache.table_width ? cache.page_table[b * cache.table_width + logical] : -1;
    if (page < 0) return std::nullopt;
    return ((static_cast<std::size_t>(page) * cache.page_size + slot % cache.page_size) * cache.heads_kv + g) *
           cache.head_size * cache.element_bytes();
  }

  void write_cache(const AttnParams& p, KvCache& cache, int b, std::int64_t s, std::int64_t e) {
    forget_rows();
    if (cache.tokens_written[b] == 0 && cache.policy == CachePolicy::ring_compact)
      cache.geometry[b].base = compact_ring_base(e - s, cache.slots);
    const std::size_t bytes = static_cast<std::size_t>(p.head_size) * dtype_bytes(p.dtype);
    auto put = [&](const unsigned char* src, float descale, unsigned char* dst) {
      if (!fp8(p)) return static_cast<void>(std::copy_n(src, bytes, dst));
      for (int d = 0; d < p.head_size; ++d)
        dst[d] = encode(p, load_from(p.dtype, src + d * dtype_bytes(p.dtype)), descale);
    };
    for (std::int64_t pos = s; pos < e; ++pos) {
      if (pos < cache.geometry[b].base) continue;
      if (cache.paged() && cache.page_of(b, pos) < 0) continue;
      if (fault_ == Fault::recycled_page_read && cache.paged()) {  // what the slot held before this write
        const std::size_t row = static_cast<std::size_t>(p.heads_kv) * p.head_size * cache.element_bytes();
        const std::size_t off = cache.offset(b, pos, 0);
        unwritten_k_.assign(cache.k.begin() + off, cache.k.begin() + off + row);
        unwritten_v_.assign(cache.v.begin() + off, cache.v.begin() + off + row);
      }
      const bool ring = cache.policy == CachePolicy::ring_modulo || cache.policy == CachePolicy::ring_compact;
      std::int64_t slot = cache.slot_of(b, pos);
      if (ring && (fault_ == Fault::ring_slot_off_by_one || fault_ == Fault::cache_slot_shifted))
        slot = (slot + 1) % cache.slots;
      const bool wraps = ring && pos - cache.geometry[b].base >= cache.slots;
      if (wraps && fault_ == Fault::stale_slot_after_wrap) continue;
      for (int g = 0; g < p.heads_kv; ++g) {
        const std::size_t off = cache.offset(b, slot, g);
        put(at(p, p.k, p.k_row_stride, p.k_head_stride, p.seq_offsets[b] + pos, g), p.k_descale, &cache.k[off]);
        put(at(p, p.v, p.v_row_stride, p.v_head_stride, p.seq_offsets[b] + pos, g), p.v_descale, &cache.v[off]);
      }
    }
    cache.tokens_written[b] = e;
  }

  // The slot a consistent shifted writer put the position of `slot` into is slot + 1: reading slot s
  // as holding what position_in says of s - 1 gives back the right keys.
  std::int64_t shifted_back(const KvCache& cache, std::int64_t slot) const {
    if (fault_ != Fault::cache_slot_shifted || cache.policy == CachePolicy::linear || cache.paged()) return slot;
    return (slot + cache.slots - 1) % cache.slots;
  }

  static int mantissa_bits(DType dt) { return dt == DType::fp32 ? 23 : dt == DType::fp16 ? 10 : 7; }

  // Rounds to `bits` explicit mantissa bits, nearest even (exponent range of fp32).
  static float round_mantissa(float x, int bits) {
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    const int drop = 23 - bits;
    const std::uint32_t half = 1u << (drop - 1), lsb = (u >> drop) & 1u;
    u = (u + half - 1 + lsb) & ~((1u << drop) - 1);
    std::memcpy(&x, &u, 4);
    return x;
  }

  std::size_t converted_row(const AttnParams& p, const Key& key, bool value) {
    const unsigned char* row = value ? key.v : key.k;
    const auto [it, added] = row_offsets_[value].try_emplace(row, row_memo_.size());
    if (added)
      for (int d = 0; d < p.head_size; ++d) row_memo_.push_back(kv_element(p, key, value, d));
    return it->second;
  }
  void forget_rows() {
    for (auto& offsets : row_offsets_) offsets.clear();
    row_memo_.clear();
  }

  // Softmax(scale q.k) . v over keys_ in fp32, output rounded to the dtype.
  void attend(const AttnParams& p, int b, std::int64_t i, int h) {
    const int D = p.head_size;
    const DType dt = p.dtype;
    const unsigned char* q = at(p, p.q, p.q_row_stride, p.q_head_stride, p.seq_offsets[b] + i, h);
    // The same floats in the same order as converting element by element; each row converted once per call.
    q_row_.resize(D);
    for (int d = 0; d < D; ++d) q_row_[d] = load_from(dt, q + d * dtype_bytes(dt));
    rows_.resize(keys_.size());
    auto convert_rows = [&](bool value) {
      for (std::size_t n = 0; n < keys_.size(); ++n) rows_[n] = converted_row(p, keys_[n], value);
    };
    convert_rows(false);
    scores_.resize(keys_.size());
    for (std::size_t n = 0; n < keys_.size(); ++n) {
      float s = 0.f;
      for (int d = 0; d < D; ++d) s += q_row_[d] * row_memo_[rows_[n] + d];
      scores_[n] = s * p.scale + (adds_mask(p) ? bias_[n] : 0.f);
      if (p.softcap > 0.f && paged_fp8_fault(p, Fault::softcap_before_k_descale)) {
        scores_[n] = p.softcap * std::tanh(scores_[n] / p.k_descale / p.softcap) * p.k_descale;
        continue;
      }
      if (p.softcap > 0.f) scores_[n] = keys_[n].hidden ? -p.softcap : p.softcap * std::tanh(scores_[n] / p.softcap);
      if (fault_ == Fault::scores_low_precision) scores_[n] = round_mantissa(scores_[n], mantissa_bits(dt) - 3);
    }
    const bool sees_key = std::any_of(keys_.begin(), keys_.end(), [](const Key& k) { return !k.hidden; });
    const bool has_sink = p.sinks && !(fault_ == Fault::sink_ignored_two_sided && p.band.right != 0);
    float sink = has_sink ? p.sinks[h] : -INFINITY;
    if (has_sink && fault_ == Fault::sink_through_softcap && p.softcap > 0.f) sink = p.softcap * std::tanh(sink / p.softcap);
    if (has_sink && paged_fp8_fault(p, Fault::sink_scaled_by_k_descale)) sink *= p.k_descale;
    const float m = fault_ == Fault::no_max_subtraction || scores_.empty()
                        ? 0.f
                        : std::max(*std::max_element(scores_.begin(), scores_.end()), sink);
    const float sink_weight = has_sink ? std::exp(sink - m) : 0.f;
    float sum = sink_weight;
    for (float& s : scores_) sum += (s = std::exp(s - m));
    if (fault_ == Fault::p_low_precision) {
      for (float& s : scores_) s = round_mantissa(s, mantissa_bits(dt) - 3);
    }
    acc_.assign(D, 0.f);
    convert_rows(true);
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      const std::size_t n = fault_ == Fault::none_reversed ? keys_.size() - 1 - k : k;
      for (int d = 0; d < D; ++d) {
        const float x = scores_[n] * row_memo_[rows_[n] + d];
        const bool half = fault_ == Fault::fp16_pv_accumulation || (fault_ == Fault::fp16_pv_decode_only && decoding_);
        acc_[d] = half ? static_cast<float>(Eigen::half(acc_[d] + x)) : acc_[d] + x;
      }
    }
    auto* out = static_cast<unsigned char*>(p.out) +
                ((p.seq_offsets[b] + i) * p.out_row_stride + h * p.out_head_stride) * dtype_bytes(dt);
    if (fault_ == Fault::sink_in_numerator)
      for (float& a : acc_) a += sink_weight;
    for (int d = 0; d < D; ++d)
      store_as(dt, sees_key ? acc_[d] / sum : 0.f, out + d * dtype_bytes(dt));
  }

  Fault fault_;
  std::int64_t sequence_length_ = 0;  // of the sequence prefill is on
  bool decoding_ = false;
  bool reading_paged_ = false;  // the keys of this call come from a paged cache
  bool in_chunk_call_ = false;  // a chunked_prefill call (the prompt's, in decode too)
  std::vector<Key> keys_;
  std::vector<unsigned char> unwritten_k_, unwritten_v_;  // recycled_page_read: the new slot's K/V before the write
  std::vector<float> scores_, acc_, bias_, q_row_;
  std::vector<std::size_t> rows_;  // keys_[n]'s K or V row: its offset in row_memo_
  // K ([0]) and V ([1]) rows as floats, by where they are read from (apart: an FP8 K and V that
  // alias the same bytes decode with different descales); forgotten whenever the cache is written.
  std::unordered_map<const unsigned char*, std::size_t> row_offsets_[2];
  std::vector<float> row_memo_;
};

}  // namespace

std::unique_ptr<Dut> make_mutant(Fault fault) { return std::make_unique<MutantDut>(fault); }

}  // namespace swa::dut
