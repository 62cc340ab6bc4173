#pragma once
// The KV cache is part of a DUT's contract (ATB and serving stacks hand it to other kernels), so the
// cache a DUT leaves behind is compared with the golden's cache model: per sequence, the compact
// ring's base, tokens_written, and per slot which position it holds, bit for bit in the storage dtype
// (FP8 KV: the codes of the golden's own encoder). A paged cache: per sequence, tokens_written and
// its page table entry by entry, and every position the golden's model holds, at the physical page
// the model says (the contents of freed pages and of unwritten slots are free).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/kv_cache_model.hpp"
#include "swa/paged_kv_model.hpp"

namespace swa::harness {

// What one cache difference is, for bisect's cache finding (CacheChecker::keep_details).
struct CacheMismatch {
  enum class Kind { geometry, tokens_written, base, page_table, slot };
  // What a slot holds: zeros, an input row's stored K/V (`held_sequence`, `held`), or bytes of no row.
  enum class Held { zeros, position, no_position };
  Kind kind = Kind::slot;
  std::string call;        // "chunk 2", "decode step 0"
  bool last_call = false;  // the schedule's last call
  int sequence = 0;
  std::int64_t slot = -1;      // slot (ring, linear) or position (paged) that differs
  std::int64_t page = -1;      // paged: the physical page of that position; page_table: the logical page
  Held held_kind = Held::zeros;
  int held_sequence = 0;
  std::int64_t held = -1;      // the position held (Held::position)
  std::int64_t expected = -1;  // the position the golden's model holds there, -1 none
  std::int64_t got_value = 0, expected_value = 0;  // tokens_written, base, page table entry
  // An FP8 slot holding bytes of no row, where the model holds a position (the first 64 such slots):
  // every element's code, with the value the kernel was to encode, for bisect to fit the codec on.
  struct StoredCode {
    bool value = false;     // V (else K)
    int head = 0, dim = 0;
    double encoded = 0;     // the input / its descale, in fp64
    std::uint8_t expected = 0, got = 0;
    bool differs = false;   // got is neither the code nor the other one a correct kernel may store
  };
  std::vector<StoredCode> codes;
  // A slot holding bytes of no row, where the model holds a position: per kv head, what that head's
  // K/V hold: kv head g of the expected row (g >= 0; its own when right), zeros (-2), neither (-1).
  static constexpr int kHeadZeros = -2, kHeadOther = -1;
  std::vector<int> head_holds;
  // And where each kv head's K/V are found among every input row (the first 16 such slots): the
  // (sequence, position, kv head) whose stored K and V they equal, {-1, -1, -1} none, head kHeadZeros
  // when they are zeros. A cache in
  // another dimension order holds whole heads of other rows.
  struct HeadRow {
    int sequence = -1;
    std::int64_t position = -1;
    int head = -1;
  };
  std::vector<HeadRow> head_rows;
  // Ring and linear caches, on the first differing slot of a sequence in a call: the position the
  // golden's model holds in every slot of that sequence then (-1 none), so a fitted slot rule can be
  // held to the slots that agree as well as to those that differ.
  std::vector<std::int64_t> model_positions;
};

class CacheChecker final : public dut::ScheduleObserver {
 public:
  // when: every_call compares after every chunk and decode step; end_of_schedule after the last call only.
  CacheChecker(const Problem& problem, dut::CacheReport when);

  void after_chunk(const AttnParams& p, const dut::KvCache& cache, int chunk_index) override;
  void after_decode_step(const AttnParams& p, const dut::KvCache& cache, int step) override;

  // Differing (sequence, slot) pairs plus differing base / tokens_written values, summed over every
  // comparison; the first difference in words ("after chunk 2: sequence 0 slot 3 holds position 10,
  // expected position 9").
  std::int64_t mismatches() const { return mismatches_; }
  const std::string& first_mismatch() const { return first_; }
  // Record the first `limit` differences as values too (bisect; the runner needs only the words).
  void keep_details(std::size_t limit) { detail_limit_ = limit; }
  const std::vector<CacheMismatch>& details() const { return details_; }

 private:
  std::string when() const;
  void advance(const std::vector<std::array<std::int64_t, 3>>& writes);
  void compare(const dut::KvCache& cache, const std::string& when);
  void compare_paged(const dut::KvCache& cache, const std::string& when);
  struct HeldRow {
    CacheMismatch::Held kind = CacheMismatch::Held::zeros;
    int sequence = 0;
    std::int64_t position = -1;
  };
  HeldRow held_row(const dut::KvCache& cache, std::size_t offset) const;
  CacheMismatch::HeadRow head_row(const unsigned char* k, const unsigned char* v) const;
  std::string held_position(int b, const dut::KvCache& cache, std::size_t offset) const;
  void record(CacheMismatch m, const dut::KvCache* cache, std::size_t offset);
  // record() of a slot, with its FP8 codes when it holds bytes of no row (want: the codes expected).
  void record_slot(CacheMismatch m, const dut::KvCache& cache, std::size_t offset, std::int64_t input_row,
                   const std::vector<unsigned char>& want_k, const std::vector<unsigned char>& want_v);
  std::size_t slots_with_codes_ = 0;
  std::size_t slots_with_head_rows_ = 0;
  std::string call_;
  bool last_call_ = false;
  std::size_t detail_limit_ = 0;
  std::vector<CacheMismatch> details_;

  const Problem& pr_;
  bool each_call_;
  int calls_left_;
  std::vector<KvCacheModel> models_;
  std::optional<PagedKvModel> paged_;
  bool prepared_ = false;
  void prepare();  // the rest, at the first call
  std::vector<double> k_, v_;  // the problem's K and V in fp64 as attention reads them, [nTokens, Hkv, D]
  std::vector<double> raw_k_, raw_v_;  // FP8 only: the inputs before their encoding
  std::size_t element_bytes_;
  // Every input row as the cache stores it: the problem's storage, or FP8 codes made here.
  const unsigned char* stored_k_ = nullptr;
  const unsigned char* stored_v_ = nullptr;
  std::vector<unsigned char> fp8_k_, fp8_v_;
  // Per element, the other FP8 code a correct kernel may store: the one of value / descale computed
  // in fp32 (a division, or a product with the reciprocal) where that rounding moves the quotient
  // across a rounding midpoint of the format; the code itself elsewhere. Descales are not powers of
  // two (inputs.cpp), so the quotient is rounded before it is encoded.
  std::vector<unsigned char> fp8_k_other_, fp8_v_other_;
  // Whether `got` (one row of every kv head, as the cache stores it) is the row `want` holds, up to
  // those codes where the model holds input row `input_row` in every head (held[g]).
  bool same_row(const unsigned char* got, const unsigned char* want, std::int64_t input_row,
                const std::vector<unsigned char>& other, const std::vector<char>& held) const;
  // count values of one row as the cache stores them (the dtype, or FP8 codes of value / descale).
  void store(const double* values, std::size_t count, float descale, unsigned char* dst) const;
  // store() of one head's row the model holds for input row `input_row`: when it holds that row's
  // values (as it should), their stored bytes (the problem's storage, or the FP8 codes prepare()
  // made) are copied.
  // Returns whether it held that row.
  bool store_held(const double* values, std::int64_t input_row, int head, const std::vector<double>& input,
                  const unsigned char* input_stored, float descale, unsigned char* dst) const;
  std::int64_t mismatches_ = 0;
  std::string first_;
};

}  // namespace swa::harness
