#include "swa/harness/judge/cache_check.hpp"

#include <algorithm>
#include <utility>
#include <array>
#include <cmath>
#include <cstring>
#include <sstream>

namespace swa::harness {
namespace {

using Kind = CacheMismatch::Kind;

std::int64_t cache_slots(const AttnParams& p) {
  std::int64_t longest = 0;
  for (int b = 0; b < p.batch; ++b) longest = std::max<std::int64_t>(longest, p.seq_lens[b]);
  return p.cache == CachePolicy::linear ? longest : p.band.left + 1;
}

}  // namespace

CacheChecker::CacheChecker(const Problem& problem, dut::CacheReport when)
    : pr_(problem),
      each_call_(when == dut::CacheReport::every_call),
      calls_left_(dut::chunk_count(problem.params) +
                  (problem.params.mode == RunMode::decode ? problem.params.decode_steps : 0)),
      element_bytes_(kv_element_bytes(problem.params.kv_format, problem.params.dtype)) {}

namespace {

// Values in dtype storage widened to fp64, a block at a time (no zero-filled vector first).
std::vector<double> widened(const std::vector<unsigned char>& storage, DType dtype) {
  const std::size_t n = storage.size() / dtype_bytes(dtype);
  std::vector<double> out;
  out.reserve(n);
  for_each_loaded_block(dtype, storage.data(), n,
                        [&](const float* block, std::size_t m) { out.insert(out.end(), block, block + m); });
  return out;
}

}  // namespace

// The models and the inputs' fp64 and stored forms, at the first call of the schedule: a DUT that
// skips the scenario costs nothing.
void CacheChecker::prepare() {
  if (prepared_) return;
  prepared_ = true;
  const AttnParams& p = pr_.params;
  k_ = widened(pr_.k_storage, p.dtype);
  v_ = widened(pr_.v_storage, p.dtype);
  if (is_fp8(p.kv_format)) {
    // A value read back from its FP8 code encodes to that code again (decode times descale, divided
    // by descale, is exact in fp64), so each element is encoded once; a NaN code goes the long way.
    auto read_back = [&](std::vector<double>& values, float descale, std::vector<unsigned char>& stored,
                         std::vector<unsigned char>& other) {
      stored.resize(values.size());
      other.resize(values.size());
      const float reciprocal = 1.f / descale;
      for (std::size_t i = 0; i < values.size(); ++i) {
        const auto x = static_cast<float>(values[i]);  // exact: a value of the storage dtype
        const std::uint8_t code = fp8_encode(p.kv_format, values[i] / descale);
        const std::uint8_t divided = fp8_encode(p.kv_format, x / descale);
        other[i] = divided != code ? divided : fp8_encode(p.kv_format, x * reciprocal);
        values[i] = fp8_decode(p.kv_format, code) * descale;
        stored[i] = std::isnan(values[i]) ? fp8_encode(p.kv_format, values[i] / descale) : code;
        if (std::isnan(values[i])) other[i] = stored[i];
      }
    };
    raw_k_ = k_, raw_v_ = v_;
    read_back(k_, p.k_descale, fp8_k_, fp8_k_other_);
    read_back(v_, p.v_descale, fp8_v_, fp8_v_other_);
    stored_k_ = fp8_k_.data();
    stored_v_ = fp8_v_.data();
  } else {
    stored_k_ = pr_.k_storage.data();  // the inputs as the kernels read them: what a cache stores
    stored_v_ = pr_.v_storage.data();
  }
  if (p.cache == CachePolicy::paged) {
    paged_.emplace(p);
    return;
  }
  const std::int64_t slots = cache_slots(p);
  for (int b = 0; b < p.batch; ++b) models_.emplace_back(p.cache, slots, slots, p.heads_kv, p.head_size);
}

void CacheChecker::store(const double* values, std::size_t count, float descale, unsigned char* dst) const {
  const AttnParams& p = pr_.params;
  if (is_fp8(p.kv_format)) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = fp8_encode(p.kv_format, values[i] / descale);
    return;
  }
  constexpr std::size_t kBlock = 64;
  float block[kBlock];
  for (std::size_t i0 = 0; i0 < count; i0 += kBlock) {
    const std::size_t n = std::min(kBlock, count - i0);
    for (std::size_t i = 0; i < n; ++i) block[i] = static_cast<float>(values[i0 + i]);
    store_all_as(p.dtype, block, n, dst + i0 * element_bytes_);
  }
}

bool CacheChecker::store_held(const double* values, std::int64_t input_row, int head, const std::vector<double>& input,
                              const unsigned char* input_stored, float descale, unsigned char* dst) const {
  const AttnParams& p = pr_.params;
  const std::size_t first = (static_cast<std::size_t>(input_row) * p.heads_kv + head) * p.head_size;
  const std::size_t n = static_cast<std::size_t>(p.head_size);
  if (first + n <= input.size() && std::memcmp(values, &input[first], n * sizeof(double)) == 0) {
    std::memcpy(dst, input_stored + first * element_bytes_, n * element_bytes_);
    return true;
  }
  store(values, n, descale, dst);
  return false;
}

bool CacheChecker::same_row(const unsigned char* got, const unsigned char* want, std::int64_t input_row,
                            const std::vector<unsigned char>& other, const std::vector<char>& held) const {
  const AttnParams& p = pr_.params;
  const std::size_t row = static_cast<std::size_t>(p.heads_kv) * p.head_size;
  if (std::memcmp(got, want, row * element_bytes_) == 0) return true;
  if (!is_fp8(p.kv_format)) return false;
  const std::size_t first = static_cast<std::size_t>(input_row) * row;
  for (std::size_t i = 0; i < row; ++i)
    if (got[i] != want[i] && !(held[i / p.head_size] && got[i] == other[first + i])) return false;
  return true;
}

std::string CacheChecker::when() const { return each_call_ ? "" : "at the end of the schedule, "; }

// One call of the schedule on the golden's models: per sequence rows [s, e) and the next reader. A
// paged pool takes every sequence's pages, stores, then frees, in batch order (paging.hpp).
void CacheChecker::advance(const std::vector<std::array<std::int64_t, 3>>& writes) {
  const AttnParams& p = pr_.params;
  const std::int64_t row = static_cast<std::int64_t>(p.heads_kv) * p.head_size;
  auto first = [&](int b) { return static_cast<std::size_t>(p.seq_offsets[b] + writes[b][0]) * row; };
  auto writes_rows = [&](int b) { return writes[b][0] < writes[b][1]; };
  if (!paged_) {
    for (int b = 0; b < p.batch; ++b)
      if (writes_rows(b)) models_[b].write(writes[b][0], writes[b][1] - writes[b][0], &k_[first(b)], &v_[first(b)], row);
    return;
  }
  for (int b = 0; b < p.batch; ++b)
    if (writes_rows(b)) paged_->take(b, writes[b][0], writes[b][1], writes[b][2]);
  for (int b = 0; b < p.batch; ++b)
    if (writes_rows(b)) paged_->store(b, writes[b][0], writes[b][1], &k_[first(b)], &v_[first(b)], row);
  for (int b = 0; b < p.batch; ++b)
    if (writes_rows(b)) paged_->release(b, writes[b][1]);
}

void CacheChecker::after_chunk(const AttnParams& p, const dut::KvCache& cache, int chunk_index) {
  prepare();
  std::vector<std::array<std::int64_t, 3>> writes;
  for (int b = 0; b < p.batch; ++b) {
    const std::int64_t e = dut::chunk_end(p, b, chunk_index);
    writes.push_back({dut::chunk_begin(p, b, chunk_index), e, e});
  }
  advance(writes);
  call_ = "chunk " + std::to_string(chunk_index);
  last_call_ = calls_left_ == 1;
  if (each_call_ || --calls_left_ == 0) compare(cache, when() + "after chunk " + std::to_string(chunk_index));
  if (each_call_) --calls_left_;
}

void CacheChecker::after_decode_step(const AttnParams& p, const dut::KvCache& cache, int step) {
  prepare();
  std::vector<std::array<std::int64_t, 3>> writes;
  for (int b = 0; b < p.batch; ++b) {
    const std::int64_t pos = prompt_len(p, b) + step;
    writes.push_back({pos, pos + 1, pos});
  }
  advance(writes);
  call_ = "decode step " + std::to_string(step);
  last_call_ = calls_left_ == 1;
  if (each_call_ || --calls_left_ == 0) compare(cache, when() + "after decode step " + std::to_string(step));
  if (each_call_) --calls_left_;
}

// The input row whose K and V (every kv head) the slot holds, found by value.
CacheChecker::HeldRow CacheChecker::held_row(const dut::KvCache& cache, std::size_t offset) const {
  const AttnParams& p = pr_.params;
  const std::size_t row_bytes = static_cast<std::size_t>(p.heads_kv) * p.head_size * element_bytes_;
  const unsigned char* k = &cache.k[offset];
  const unsigned char* v = &cache.v[offset];
  if (std::all_of(k, k + row_bytes, [](unsigned char c) { return c == 0; }) &&
      std::all_of(v, v + row_bytes, [](unsigned char c) { return c == 0; }))
    return {};
  const std::int64_t first = p.seq_offsets[0], end = p.seq_offsets[p.batch];
  for (std::int64_t r = first; r < end; ++r) {
    const std::size_t off = static_cast<std::size_t>(r) * row_bytes;
    if (std::memcmp(k, stored_k_ + off, row_bytes) == 0 && std::memcmp(v, stored_v_ + off, row_bytes) == 0) {
      const auto seq = std::upper_bound(p.seq_offsets, p.seq_offsets + p.batch + 1, r) - p.seq_offsets - 1;
      return {CacheMismatch::Held::position, static_cast<int>(seq), r - p.seq_offsets[seq]};
    }
  }
  return {CacheMismatch::Held::no_position, 0, -1};
}

// The input row and kv head whose stored K and V (one head's head_size values each) these are.
CacheMismatch::HeadRow CacheChecker::head_row(const unsigned char* k, const unsigned char* v) const {
  const AttnParams& p = pr_.params;
  const std::size_t head_bytes = static_cast<std::size_t>(p.head_size) * element_bytes_;
  const std::size_t row_bytes = head_bytes * p.heads_kv;
  if (std::all_of(k, k + head_bytes, [](unsigned char c) { return c == 0; }) &&
      std::all_of(v, v + head_bytes, [](unsigned char c) { return c == 0; }))
    return {-1, -1, CacheMismatch::kHeadZeros};
  for (std::int64_t r = p.seq_offsets[0]; r < p.seq_offsets[p.batch]; ++r)
    for (int g = 0; g < p.heads_kv; ++g) {
      const std::size_t off = static_cast<std::size_t>(r) * row_bytes + g * head_bytes;
      if (std::memcmp(k, stored_k_ + off, head_bytes) == 0 && std::memcmp(v, stored_v_ + off, head_bytes) == 0) {
        const auto seq = std::upper_bound(p.seq_offsets, p.seq_offsets + p.batch + 1, r) - p.seq_offsets - 1;
        return {static_cast<int>(seq), r - p.seq_offsets[seq], g};
      }
    }
  return {};
}

// The same in words, for the message.
std::string CacheChecker::held_position(int b, const dut::KvCache& cache, std::size_t offset) const {
  const HeldRow h = held_row(cache, offset);
  if (h.kind == CacheMismatch::Held::zeros) return "nothing (zeros)";
  if (h.kind == CacheMismatch::Held::no_position) return "data of no position (K/V differ from every input row)";
  return h.sequence == b ? "position " + std::to_string(h.position)
                         : "position " + std::to_string(h.position) + " of sequence " + std::to_string(h.sequence);
}

void CacheChecker::record(CacheMismatch m, const dut::KvCache* cache, std::size_t offset) {
  if (details_.size() >= detail_limit_) return;
  m.call = call_;
  m.last_call = last_call_;
  if (cache) {
    const HeldRow h = held_row(*cache, offset);
    m.held_kind = h.kind;
    m.held_sequence = h.sequence;
    m.held = h.position;
  }
  details_.push_back(std::move(m));
}

void CacheChecker::record_slot(CacheMismatch m, const dut::KvCache& cache, std::size_t offset, std::int64_t input_row,
                               const std::vector<unsigned char>& want_k, const std::vector<unsigned char>& want_v) {
  const std::size_t before = details_.size();
  record(std::move(m), &cache, offset);
  const AttnParams& p = pr_.params;
  if (details_.size() == before) return;
  CacheMismatch& r = details_.back();
  if (r.held_kind != CacheMismatch::Held::no_position || r.expected < 0) return;
  const std::size_t row = static_cast<std::size_t>(p.heads_kv) * p.head_size, first = static_cast<std::size_t>(input_row) * row;
  const std::size_t head_bytes = static_cast<std::size_t>(p.head_size) * element_bytes_;
  for (int g = 0; g < p.heads_kv; ++g) {
    const unsigned char* k = &cache.k[offset + g * head_bytes];
    const unsigned char* v = &cache.v[offset + g * head_bytes];
    int holds = std::all_of(k, k + head_bytes, [](unsigned char c) { return c == 0; }) &&
                        std::all_of(v, v + head_bytes, [](unsigned char c) { return c == 0; })
                    ? CacheMismatch::kHeadZeros
                    : CacheMismatch::kHeadOther;
    for (int from = 0; from < p.heads_kv && holds == CacheMismatch::kHeadOther; ++from)
      if (std::memcmp(k, &want_k[from * head_bytes], head_bytes) == 0 && std::memcmp(v, &want_v[from * head_bytes], head_bytes) == 0)
        holds = from;
    r.head_holds.push_back(holds);
  }
  if (slots_with_head_rows_ < 16 &&
      std::count(r.head_holds.begin(), r.head_holds.end(), CacheMismatch::kHeadOther) > 0) {
    ++slots_with_head_rows_;
    for (int g = 0; g < p.heads_kv; ++g) r.head_rows.push_back(head_row(&cache.k[offset + g * head_bytes], &cache.v[offset + g * head_bytes]));
  }
  if (!is_fp8(p.kv_format) || slots_with_codes_ >= 64) return;
  ++slots_with_codes_;
  for (const bool value : {false, true}) {
    const unsigned char* got = value ? &cache.v[offset] : &cache.k[offset];
    const std::vector<unsigned char>& want = value ? want_v : want_k;
    const std::vector<unsigned char>& other = value ? fp8_v_other_ : fp8_k_other_;
    const std::vector<double>& raw = value ? raw_v_ : raw_k_;
    const float descale = value ? p.v_descale : p.k_descale;
    for (std::size_t i = 0; i < row; ++i)
      r.codes.push_back({value, static_cast<int>(i / p.head_size), static_cast<int>(i % p.head_size), raw[first + i] / descale,
                         want[i], got[i], got[i] != want[i] && got[i] != other[first + i]});
  }
}

void CacheChecker::compare(const dut::KvCache& cache, const std::string& when) {
  const AttnParams& p = pr_.params;
  const std::size_t elem = element_bytes_;
  const std::size_t row_bytes = static_cast<std::size_t>(p.heads_kv) * p.head_size * elem;
  std::vector<unsigned char> want_k(row_bytes), want_v(row_bytes);
  std::vector<char> held_k(static_cast<std::size_t>(p.heads_kv)), held_v(held_k);
  auto note = [&](auto&& describe) {  // words only for the first difference: finding a held position scans the inputs
    if (mismatches_++ == 0) first_ = when + ": " + describe();
  };
  if (paged_) return compare_paged(cache, when);
  const std::int64_t slots = cache_slots(p);
  if (cache.slots != slots || static_cast<int>(cache.tokens_written.size()) != p.batch ||
      cache.k.size() != static_cast<std::size_t>(p.batch) * slots * row_bytes || cache.v.size() != cache.k.size()) {
    record(CacheMismatch{.kind = Kind::geometry}, nullptr, 0);
    note([&] { return "the cache has " + std::to_string(cache.slots) + " slots for " + std::to_string(cache.tokens_written.size()) +
         " sequences, expected " + std::to_string(slots) + " for " + std::to_string(p.batch); });
    return;
  }
  if (std::any_of(cache.tokens_written.begin(), cache.tokens_written.end(), [](std::int64_t t) { return t < 0; })) {
    record(CacheMismatch{.kind = Kind::geometry}, nullptr, 0);
    note([] { return std::string("the DUT reported no KV cache (tokens_written -1)"); });
    return;
  }
  for (int b = 0; b < p.batch; ++b) {
    const KvCacheModel& m = models_[b];
    const std::string seq = "sequence " + std::to_string(b);
    if (cache.tokens_written[b] != m.newest_position() + 1) {
      record(CacheMismatch{.kind = Kind::tokens_written, .sequence = b, .got_value = cache.tokens_written[b],
                           .expected_value = m.newest_position() + 1},
             nullptr, 0);
      note([&] {
        return seq + " has tokens_written " + std::to_string(cache.tokens_written[b]) + ", expected " +
               std::to_string(m.newest_position() + 1);
      });
    }
    if (p.cache == CachePolicy::ring_compact && cache.geometry[b].base != m.geometry().base) {
      record(CacheMismatch{.kind = Kind::base, .sequence = b, .got_value = cache.geometry[b].base,
                           .expected_value = m.geometry().base},
             nullptr, 0);
      note([&] {
        return seq + " has compact ring base " + std::to_string(cache.geometry[b].base) + ", expected " +
               std::to_string(m.geometry().base);
      });
    }
    bool model_given = false;  // this sequence's model positions, on its first differing slot of the call
    for (std::int64_t slot = 0; slot < slots; ++slot) {
      const std::int64_t pos = m.position(slot);
      const std::int64_t input_row = p.seq_offsets[b] + std::max<std::int64_t>(pos, 0);
      std::fill(want_k.begin(), want_k.end(), 0);
      std::fill(want_v.begin(), want_v.end(), 0);
      std::fill(held_k.begin(), held_k.end(), 0);
      std::fill(held_v.begin(), held_v.end(), 0);
      if (pos >= 0)
        for (int g = 0; g < p.heads_kv; ++g) {
          const std::size_t at = static_cast<std::size_t>(g) * p.head_size * elem;
          held_k[g] = store_held(m.key(slot, g), input_row, g, k_, stored_k_, p.k_descale, &want_k[at]);
          held_v[g] = store_held(m.value(slot, g), input_row, g, v_, stored_v_, p.v_descale, &want_v[at]);
        }
      const std::size_t off = cache.offset(b, slot, 0);
      if (same_row(&cache.k[off], want_k.data(), input_row, fp8_k_other_, held_k) &&
          same_row(&cache.v[off], want_v.data(), input_row, fp8_v_other_, held_v))
        continue;
      CacheMismatch differing{.kind = Kind::slot, .sequence = b, .slot = slot, .expected = pos};
      if (!std::exchange(model_given, true))
        for (std::int64_t s = 0; s < slots; ++s) differing.model_positions.push_back(m.position(s));
      record_slot(std::move(differing), cache, off, input_row, want_k, want_v);
      note([&] {
        return seq + " slot " + std::to_string(slot) + " holds " + held_position(b, cache, off) + ", expected " +
               (pos >= 0 ? "position " + std::to_string(pos) : std::string("nothing (an unwritten slot stays zero)"));
      });
    }
  }
}

void CacheChecker::compare_paged(const dut::KvCache& cache, const std::string& when) {
  const AttnParams& p = pr_.params;
  const PagedKvModel& m = *paged_;
  const std::size_t elem = element_bytes_;
  const std::size_t row_bytes = static_cast<std::size_t>(p.heads_kv) * p.head_size * elem;
  auto note = [&](auto&& describe) {
    if (mismatches_++ == 0) first_ = when + ": " + describe();
  };
  const std::int64_t width = m.table_width(), P = m.page_size();
  if (!cache.paged() || cache.page_size != P || cache.pages != m.pool_pages() || cache.table_width != width ||
      cache.page_table.size() != static_cast<std::size_t>(p.batch) * width ||
      static_cast<int>(cache.tokens_written.size()) != p.batch ||
      cache.k.size() != static_cast<std::size_t>(m.pool_pages()) * P * row_bytes || cache.v.size() != cache.k.size()) {
    record(CacheMismatch{.kind = Kind::geometry}, nullptr, 0);
    note([&] {
      return "the paged cache has " + std::to_string(cache.pages) + " pages of " + std::to_string(cache.page_size) +
             " positions and " + std::to_string(cache.table_width) + " page-table entries per sequence, expected " +
             std::to_string(m.pool_pages()) + " of " + std::to_string(P) + " and " + std::to_string(width);
    });
    return;
  }
  if (std::any_of(cache.tokens_written.begin(), cache.tokens_written.end(), [](std::int64_t t) { return t < 0; })) {
    record(CacheMismatch{.kind = Kind::geometry}, nullptr, 0);
    note([] { return std::string("the DUT reported no KV cache (tokens_written -1)"); });
    return;
  }
  auto page_words = [](std::int32_t page) {
    return page >= 0 ? "physical page " + std::to_string(page) : std::string("no page (freed or never taken)");
  };
  std::vector<unsigned char> want_k(row_bytes), want_v(row_bytes);
  std::vector<char> held_k(static_cast<std::size_t>(p.heads_kv)), held_v(held_k);
  for (int b = 0; b < p.batch; ++b) {
    const std::string seq = "sequence " + std::to_string(b);
    if (cache.tokens_written[b] != m.tokens_written(b)) {
      record(CacheMismatch{.kind = Kind::tokens_written, .sequence = b, .got_value = cache.tokens_written[b],
                           .expected_value = m.tokens_written(b)},
             nullptr, 0);
      note([&] {
        return seq + " has tokens_written " + std::to_string(cache.tokens_written[b]) + ", expected " +
               std::to_string(m.tokens_written(b));
      });
    }
    for (std::int64_t j = 0; j < width; ++j) {
      const std::int32_t got = cache.page_table[b * width + j], want = m.physical_page(b, j);
      if (got != want) {
        record(CacheMismatch{.kind = Kind::page_table, .sequence = b, .page = j, .got_value = got, .expected_value = want},
               nullptr, 0);
        note([&] {
          return seq + "'s page table maps logical page " + std::to_string(j) + " (positions " + std::to_string(j * P) +
                 ".." + std::to_string(j * P + P - 1) + ") to " + page_words(got) + ", expected " + page_words(want);
        });
      }
    }
    for (std::int64_t pos = 0; pos < m.tokens_written(b); ++pos) {
      if (!m.holds(b, pos)) continue;
      const std::int64_t input_row = p.seq_offsets[b] + pos;
      for (int g = 0; g < p.heads_kv; ++g) {
        const std::size_t at = static_cast<std::size_t>(g) * p.head_size * elem;
        held_k[g] = store_held(m.key(b, pos, g), input_row, g, k_, stored_k_, p.k_descale, &want_k[at]);
        held_v[g] = store_held(m.value(b, pos, g), input_row, g, v_, stored_v_, p.v_descale, &want_v[at]);
      }
      const std::int32_t page = m.physical_page(b, pos / P);
      const std::size_t off = (static_cast<std::size_t>(page) * P + pos % P) * row_bytes;
      if (same_row(&cache.k[off], want_k.data(), input_row, fp8_k_other_, held_k) &&
          same_row(&cache.v[off], want_v.data(), input_row, fp8_v_other_, held_v))
        continue;
      record_slot(CacheMismatch{.kind = Kind::slot, .sequence = b, .slot = pos, .page = page, .expected = pos}, cache, off,
                  input_row, want_k, want_v);
      note([&] {
        return seq + " position " + std::to_string(pos) + " (physical page " + std::to_string(page) + " slot " +
               std::to_string(pos % P) + ") holds " + held_position(b, cache, off) + ", expected position " +
               std::to_string(pos);
      });
    }
  }
}

}  // namespace swa::harness
