#pragma once
// Readings of the spec: the golden computed with one convention read another way, the way a kernel
// written from the same documents can read it (golden/README.md, "Readings of the spec"). The
// default Reading is the spec: read_rows with it gives golden::run's rows to fp64 rounding (a test
// holds it to that). Bisect searches these readings for one that reproduces a DUT's output.
//
// A reading is a plain value; the knobs that name and enumerate its settings, with the words a
// finding uses, are one table (reading_knobs) in harness/src/bisect.
#include <cstdint>
#include <limits>
#include <vector>

#include "swa/params.hpp"

namespace swa::golden {

// Which calls of the schedule read the spec differently; every other call reads it as the spec.
enum class CallScope : std::uint8_t { every_call, prompt_calls, later_chunks, decode_steps };

// Query head h -> kv head.
enum class KvHeadRule : std::uint8_t {
  grouped,            // h / (Hq / Hkv): the spec
  modulo,             // h % Hkv
  divided_by_kv_heads,  // h / Hkv (the group size taken as Hkv), clamped to Hkv - 1
  first,              // every query head reads kv head 0
};

// The sink logit a row of query head h uses.
enum class SinkRule : std::uint8_t {
  own_head,      // sinks[h]: the spec
  ignored,       // no sink
  kv_head,       // sinks[h / group]
  modulo,        // sinks[h % Hkv]
  first,         // sinks[0]
  scaled,        // sinks[h] * scale
  capped,        // cap * tanh(sinks[h] / cap): the sink goes through the soft-cap
  negated,       // -sinks[h]
  in_numerator,  // the spec's denominator, and the sink's weight added to every output dim (a key of value 1)
  doubled_mass,  // the sink's weight counted twice (added once per pass, or per split of two)
};

// Which keys the softmax's denominator counts (the numerator always counts the visible ones).
enum class DenominatorScope : std::uint8_t {
  visible,  // the spec
  causal,   // every key at or before the query's position, window or not
  call,     // every key the call holds (cache and chunk), masked or not
};

// Online softmax over key tiles of `tile` positions (aligned to multiples of it): what the running
// max's growth rescales.
// inverted: the factor's sign flipped, e^(m_new - m_old) for e^(m_old - m_new), on both (the running
// max seeded by the sink where there is one).
enum class TileRescale : std::uint8_t { exact, output_not_rescaled, row_sum_not_rescaled, neither_rescaled, inverted };

// An online softmax that keeps its output normalised after every key tile (none: not this form).
enum class NormalizedUpdate : std::uint8_t {
  none,
  exact,             // o = (e^(m_old - m_new) l_old o + P.V) / l_new
  row_sum_dropped,   // o = (e^(m_old - m_new) o + P.V) / l_new: the old row sum not multiplied back
  rescale_dropped,   // o = (l_old o + P.V) / l_new: the max's growth not applied to the output
};

// What the max subtracted before the exponent is taken over. Mathematically the same softmax; with
// the weights in fp32, a max far above the scores the exponent sees underflows them (the row gives 0).
enum class MaxScope : std::uint8_t {
  visible,   // the visible keys' scores: the spec
  uncapped,  // the scores before the soft-cap
  call,      // every key the call holds, masked or not
};

// A head index map: which head a row reads its Q from, or which head's output it holds.
enum class HeadMap : std::uint8_t {
  identity,               // the spec
  group_transposed,       // [Hkv, group] read as [group, Hkv]: head g * Hkv + kv holds head kv * group + g
  group_transposed_back,  // the other way: head kv * group + g holds head g * Hkv + kv
  reversed,               // head h holds head H - 1 - h
  rotated_up,             // head h holds head (h + 1) mod H
  rotated_down,           // head h holds head (h - 1) mod H
  group_first,            // every head of a GQA group holds its group's first head
};
int head_source(HeadMap map, int head, int heads_q, int heads_kv);

// Split-KV: the row's visible keys in `splits` equal parts, each a softmax of its own, merged.
enum class SplitMerge : std::uint8_t {
  exact,           // by the parts' log-sum-exps: the spec
  mean,            // the parts' normalised outputs averaged, unweighted
  max_not_shared,  // each part's output weighted by its own row sum, taken against its own max
  last_part,       // only the last part kept
  sink_per_part,   // exact, but the sink joins every part's denominator
  without_row_sums,  // the parts' normalised outputs weighted by e^(m_i - M) alone (their row sums dropped)
};

// The rows a decode step reads its Q and its own K/V from (and so writes to the cache).
enum class DecodeRow : std::uint8_t {
  own,            // row prompt + step of the sequence: the spec
  sequence_last,  // the sequence's last packed row, for every step
  previous,       // the row before its own
  prompt_last,    // the prompt's last row, for every step
};

// FP8 K/V as a kernel encodes (writes) and decodes (reads) them.
enum class Fp8Rounding : std::uint8_t { nearest_even, toward_zero, ties_away };
enum class DescaleRule : std::uint8_t {
  own,          // encode x / d, decode code * d: the spec
  other,        // decode with the other tensor's descale (V read with k_descale, K with v_descale)
  twice,        // decode code * d * d
  none_on_read,  // decode code alone
  inverted,     // encode x * d, decode code / d
};

// Where a row's window edge comes from in a kernel that computes it once per block of rows, or in
// whole key tiles: the edge of an anchor row (the row itself in the spec), rounded to a key tile,
// and then either the bound alone (masked = false: the row sees what the bound says) or the bound
// within the row's own edge (masked = true: per-element masks kept, so the rule only takes keys away).
// Query tiles are aligned to multiples of `query_tile` rows of the sequence, within the row's call.
enum class EdgeAnchor : std::uint8_t { row, query_tile_first_row, query_tile_last_row, call_first_row, call_last_row };
enum class EdgeRounding : std::uint8_t {
  exact,
  down_to_key_tile,  // the lower edge: the tile holding it starts the row; the upper: a partial last tile is dropped
  up_to_key_tile,    // the lower edge: a partial first tile is dropped; the upper: the tile holding it is kept whole
};
// Where a tile grid starts: at position 0, or (a kernel that tiles each call's own buffer) at the
// call's first row for query tiles and at the call's first visible key (its first row's lower edge,
// at least 0) for key tiles.
enum class TileGrid : std::uint8_t { absolute, call };
struct EdgeRule {
  EdgeAnchor anchor = EdgeAnchor::row;
  int query_tile = 0;  // rows, for the query-tile anchors
  EdgeRounding rounding = EdgeRounding::exact;
  int key_tile = 0;  // positions, for the roundings
  bool masked = false;
  TileGrid grid = TileGrid::absolute;  // both tile grids
  bool is_spec() const { return anchor == EdgeAnchor::row && rounding == EdgeRounding::exact; }
};

struct Reading {
  CallScope scope = CallScope::every_call;
  // Scores. NaN: the case's own value.
  double scale = std::numeric_limits<double>::quiet_NaN();
  double softcap = std::numeric_limits<double>::quiet_NaN();  // 0: no cap
  bool cap_before_scale = false;  // cap * tanh(q.k / cap) * scale
  bool cap_twice = false;         // the cap applied to the capped score again: cap * tanh(tanh(s / cap))
  bool exp2 = false;              // 2^(s - max) where e^(s - max) is meant
  // > 0: q.k summed over the first qk_dims dims only (a contraction in blocks whose partial last block
  // is dropped, or a loop bound taken from another size).
  int qk_dims = 0;
  // The window and the query's position.
  std::int64_t left_delta = 0, right_delta = 0;
  bool window_ignored = false;      // causal
  bool right_ignored = false;       // a two-sided window read as causal
  std::int64_t query_offset = 0;    // the query's position + this
  bool query_from_call_start = false;  // the query's position counted from its call's first row
  bool keys_from_call_window = false;  // only the keys a call gathers: from its first row's window start to its last row
  EdgeRule lower_edge, upper_edge;  // the window's first and last visible position, per row (the spec) or not
  int query_tile_upper_cap = 0;     // > 0: no key past the end of the row's query tile of this many rows
  // > 0: the keys a call holds padded to a whole key tile of this many positions (on padded_grid), the
  // padding kept as keys with score 0 and value 0 wherever the band reaches past the last key.
  int padded_key_tile = 0;
  TileGrid padded_grid = TileGrid::absolute;
  bool left_from_right = false;     // a two-sided window read as a radius: the left edge at R, as the right
  int cache_newest_dropped = 0;   // the newest N positions in the cache are not read (a call's own rows are)
  bool ring_reads_slots = false;  // a key read outside the window (one more on the left, ...) is what its ring slot holds
  bool decode_reads_before_write = false;  // a decode step reads its own slot before writing it: the slot's old row
  bool chunk_written_before_read = false;  // a ring's prompt call stores its rows before reading the older keys
  DecodeRow decode_row = DecodeRow::own;
  // (a slot a reading finds never written is skipped, as a kernel that masks by the slot's position would)
  KvHeadRule kv_head = KvHeadRule::grouped;
  SinkRule sink = SinkRule::own_head;
  double sink_factor = 1;  // the sink logit times this (a sink left in base e where the softmax runs in base 2: ln 2)
  // Ring caches: slots allocated (window + this). Any cache: the slot a read of the cache looks in (+ this).
  std::int64_t ring_capacity_delta = 0, ring_read_shift = 0;
  // Ring reads only (the writes the spec's): RING_COMPACT's slot taken without its base (p mod W); or a
  // prompt call's cached keys gathered from slots 0, 1, 2, ... in order (as if the ring never wrapped).
  bool ring_read_without_base = false, ring_read_in_slot_order = false;
  bool ring_read_own_key_kept = false;  // with those: a decode step's own K/V as it holds them (registers), not read back
  // Layouts: the packed [nTokens, heads, D] tensors read (Q, K/V) or written (the output) as
  // [heads, nTokens, D] over the whole batch.
  bool q_head_major = false, kv_head_major = false, out_head_major = false;
  HeadMap q_heads = HeadMap::identity;    // the row reads the Q of head head_source(h) (its K/V head its own)
  HeadMap out_heads = HeadMap::identity;  // the row holds the output of head head_source(h)
  // A chunk's pointer not advanced by the call's first row: Q of a later chunk's row read from row
  // (token - call start); a prompt call's own K/V rows read, and so stored, from row (position - call start).
  bool q_rows_from_call_start = false, kv_rows_from_call_start = false;
  bool out_head_major_per_call = false;  // with out_head_major: each call's rows [s, e) as [heads, e - s, D]
  // The softmax.
  DenominatorScope denominator = DenominatorScope::visible;
  int tile = 0;
  TileRescale tile_rescale = TileRescale::exact;
  int splits = 0;       // split-KV into this many parts of the row's visible keys (ceil(n / splits) each,
  bool splits_even = false;  // or as evenly as possible: the first n % splits one key longer,
  bool splits_drop_remainder = false;  // or floor(n / splits) each, the last n % splits keys in none),
  int split_size = 0;   // or (> 0) into parts of this many positions, aligned (position / split_size)
  SplitMerge merge = SplitMerge::exact;
  bool no_max_fp32 = false;  // e^s in fp32 without subtracting the row max (overflows past 88.7)
  bool max_from_zero = false;  // the running max starts at 0, not -inf; weights in fp32 (all-negative scores underflow)
  MaxScope max_scope = MaxScope::visible;
  // Rounding to the case's dtype (fp16, bf16) where the spec keeps fp32 or wider.
  bool round_scores = false, round_probabilities = false, round_row_sum = false, accumulate_in_dtype = false;
  bool round_sink = false;             // the sink logit held in the rounding type
  bool round_keys = false, round_values = false;  // K / V held in the rounding type (a narrower staging buffer)
  // > 0: an online softmax over key tiles of this many positions (aligned to multiples of it, walked
  // oldest first or newest first), its running row sum and/or accumulator held in the rounding type,
  // rounded after every tile's update (the sink folded in after the walk). < 0: two stages, the keys
  // before the call's first row (the cache's) and then the call's own, the state rounded between them.
  int state_tile = 0;
  bool state_newest_first = false, state_round_sum = false, state_round_acc = false;
  // With state_tile > 0: the output kept normalised between tiles (FlashAttention-1's update,
  // o = (e^(m_old - m_new) l_old o + P.V) / l_new) with one of its two factors left out; the sink
  // seeds the state (m = sink, l = 1) before the first tile.
  NormalizedUpdate normalized_update = NormalizedUpdate::none;
  DType round_type = DType::fp32;      // the type those round to: fp32 means the case's own dtype
  // FP8 KV (cases with an FP8 format only).
  KvFormat fp8_format = KvFormat::dtype;  // dtype: the case's own format
  Fp8Rounding fp8_rounding = Fp8Rounding::nearest_even;
  bool fp8_saturates = true;  // false: beyond the largest value becomes NaN (e4m3) or inf (e5m2)
  double fp8_clamp = 0;       // > 0: |x / descale| clamped to this before encoding (another type's largest value)
  DescaleRule k_descale = DescaleRule::own, v_descale = DescaleRule::own;
  // The descales as the kernel holds them: rounded to fp16/bf16 (fp32: exact) where it reads the
  // codes back, and where it encodes them too when descale_rounded_on_encode.
  DType descale_type = DType::fp32;
  bool descale_rounded_on_encode = false;
  bool fp8_chunk_keys_unquantised = false;  // a prompt call's own K/V rows read before the cache's FP8
  bool fp8_decode_key_unquantised = false;  // a decode step's own K/V (its new token) read before the cache's FP8
  // fp32 (none): encodes x / descale. Else encodes x * (1 / descale) with the reciprocal held in this
  // type (fp32 meaning the case's dtype): a multiply by a rounded reciprocal instead of a divide.
  DType fp8_encode_reciprocal = DType::fp32;
  bool fp8_encode_by_reciprocal = false;
  bool descale_cached_only = false;  // the descale rules on the keys read back from the cache alone (a call's own rows as the spec)
};

// One query row: sequence, token within it, query head.
struct RowRef {
  int sequence = 0;
  std::int64_t token = 0;
  int head = 0;
};

// Each row's output ([rows.size(), head_size], fp64) as a kernel with that reading computes it,
// through the schedule in p (its calls, the ring it writes) on p's own inputs. A row with no key and no
// sink gives 0. Throws std::invalid_argument as validate(p) does.
std::vector<double> read_rows(const AttnParams& p, const Reading& reading, const std::vector<RowRef>& rows);

// Every row in the output's order ([nTokens, heads_q, head_size]).
std::vector<double> read_all(const AttnParams& p, const Reading& reading);

// x as an FP8 format holds it after encoding with `rounding`, exactly; beyond the largest value:
// the largest (saturating), or NaN (e4m3) / inf (e5m2).
double fp8_round(KvFormat f, Fp8Rounding rounding, bool saturates, double x);

}  // namespace swa::golden
