// Readings of the spec (readings.hpp): one query row at a time, by the definition, in fp64 unless a
// reading rounds. Slow next to golden::run and meant for the few hundred rows bisect compares.
#include "swa/readings.hpp"

#include <algorithm>
#include <cmath>

#include "swa/ring_slots.hpp"

namespace swa::golden {
namespace {

// The call of sequence b's schedule that computes token t: rows [s, e).
struct Call {
  std::int64_t s = 0, e = 0, index = 0;
  bool decode = false;
};

Call call_of(const AttnParams& p, int b, std::int64_t t) {
  const std::int64_t len = p.seq_lens[b];
  if (p.mode == RunMode::prefill) return {0, len, 0, false};
  const std::int64_t prompt = prompt_len(p, b);
  if (t >= prompt) return {t, t + 1, t - prompt, true};
  const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
  const std::int64_t s = t / chunk * chunk;
  return {s, std::min(prompt, s + chunk), t / chunk, false};
}

bool in_scope(CallScope scope, const Call& c) {
  switch (scope) {
    case CallScope::every_call: return true;
    case CallScope::prompt_calls: return !c.decode;
    case CallScope::later_chunks: return !c.decode && c.index > 0;
    case CallScope::decode_steps: return c.decode;
  }
  return true;
}

bool ring(const AttnParams& p) {
  return p.mode != RunMode::prefill && (p.cache == CachePolicy::ring_modulo || p.cache == CachePolicy::ring_compact);
}

double decoded(const AttnParams& p, const Reading& r, bool key, double x, bool cached) {
  const KvFormat f = r.fp8_format == KvFormat::dtype ? p.kv_format : r.fp8_format;
  const double own = key ? p.k_descale : p.v_descale, other = key ? p.v_descale : p.k_descale;
  const DescaleRule rule = r.descale_cached_only && !cached ? DescaleRule::own : key ? r.k_descale : r.v_descale;
  auto code = [&](double y) {
    if (r.fp8_clamp > 0) y = std::clamp(y, -r.fp8_clamp, r.fp8_clamp);
    return fp8_round(f, r.fp8_rounding, r.fp8_saturates, y);
  };
  const double held = r.descale_type == DType::fp32 ? own : round_to(r.descale_type, static_cast<float>(own));
  if (r.fp8_encode_by_reciprocal && rule == DescaleRule::own) {
    const DType t = r.fp8_encode_reciprocal == DType::fp32 ? p.dtype : r.fp8_encode_reciprocal;
    const double reciprocal = round_to(t, static_cast<float>(1.0 / own));
    return code(static_cast<float>(x * reciprocal)) * own;
  }
  switch (rule) {
    case DescaleRule::own: return code(x / (r.descale_rounded_on_encode ? held : own)) * held;
    case DescaleRule::other: return code(x / own) * other;
    case DescaleRule::twice: return code(x / own) * own * own;
    case DescaleRule::none_on_read: return code(x / own);
    case DescaleRule::inverted: return code(x * own) / own;
  }
  return code(x / own) * own;
}

// One row's work: the keys it weighs, with their K and V in fp64 as the reading reads them.
class RowModel {
 public:
  RowModel(const AttnParams& p, const Reading& r, const RowRef& row) : p_(p), r_(r), row_(row) {
    call_ = call_of(p, row.sequence, row.token);
    const int group = p.heads_q / p.heads_kv;
    switch (r.kv_head) {
      case KvHeadRule::grouped: kvh_ = row.head / group; break;
      case KvHeadRule::modulo: kvh_ = row.head % p.heads_kv; break;
      case KvHeadRule::divided_by_kv_heads: kvh_ = std::min(row.head / p.heads_kv, p.heads_kv - 1); break;
      case KvHeadRule::first: kvh_ = 0; break;
    }
    scale_ = std::isnan(r.scale) ? p.scale : r.scale;
    cap_ = std::isnan(r.softcap) ? p.softcap : r.softcap;
    q_.resize(p.head_size);
    std::int64_t q_token = call_.decode ? decode_source(row.token) : row.token;
    if (r.q_rows_from_call_start && !call_.decode) q_token -= call_.s;
    const int q_head = head_source(r.q_heads, row.head, p.heads_q, p.heads_kv);
    load(p.q, p.q_row_stride, p.q_head_stride, p.seq_offsets[row.sequence] + q_token, q_head, q_.data(), r.q_head_major,
         p.heads_q);
  }

  // The anchor row's token minus this row's: where an edge rule takes its edge from.
  std::int64_t anchor_offset(const EdgeRule& e) const {
    const std::int64_t t = row_.token;
    const std::int64_t origin = e.grid == TileGrid::call ? call_.s : 0;
    const std::int64_t tile_start = e.query_tile > 0 ? origin + (t - origin) / e.query_tile * e.query_tile : t;
    switch (e.anchor) {
      case EdgeAnchor::row: return 0;
      case EdgeAnchor::query_tile_first_row: return std::max(tile_start, call_.s) - t;
      case EdgeAnchor::query_tile_last_row:
        return std::min(tile_start + std::max(e.query_tile, 1) - 1, call_.e - 1) - t;
      case EdgeAnchor::call_first_row: return call_.s - t;
      case EdgeAnchor::call_last_row: return call_.e - 1 - t;
    }
    return 0;
  }

  // An edge position rounded to the rule's key tiles: a lower edge (the first visible position) or an
  // upper one (the last).
  // `key_origin`: where the key tiles start (0, or the call's first visible key).
  static std::int64_t rounded(const EdgeRule& e, std::int64_t edge, bool upper, std::int64_t key_origin) {
    if (e.rounding == EdgeRounding::exact || e.key_tile <= 0) return edge;
    const std::int64_t t = e.key_tile;
    auto floor_div = [](std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
    const bool down = e.rounding == EdgeRounding::down_to_key_tile;
    const std::int64_t x = edge - key_origin;
    if (!upper) return key_origin + (down ? floor_div(x, t) : floor_div(x + t - 1, t)) * t;
    return key_origin + (down ? floor_div(x + 1, t) * t - 1 : floor_div(x, t) * t + t - 1);
  }

  // The call's first visible key: its first row's lower edge, at least 0 (where a kernel that gathers
  // the call's keys into one buffer starts it).
  std::int64_t key_origin(const EdgeRule& e, std::int64_t call_first_lower) const {
    return e.grid == TileGrid::call ? std::max<std::int64_t>(0, call_first_lower) : 0;
  }

  void compute(double* out) {
    const std::int64_t len = p_.seq_lens[row_.sequence];
    const std::int64_t available = p_.mode == RunMode::prefill ? len : call_.e;
    const std::int64_t qpos = (r_.query_from_call_start ? row_.token - call_.s : row_.token) + r_.query_offset;
    WindowBand band = p_.band;
    if (band.left >= 0) band.left = r_.window_ignored ? -1 : std::max<std::int64_t>(-1, band.left + r_.left_delta);
    if (r_.right_ignored) band.right = 0;
    else if (band.right >= 0) band.right = std::max<std::int64_t>(0, band.right + r_.right_delta);
    std::vector<double> k(p_.head_size), v(p_.head_size);
    constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max() / 4;
    // The row's own edges at query position x (the spec, with the reading's deltas).
    auto lower_at = [&](std::int64_t x) {
      return band.left >= 0 && r_.left_from_right && band.right > 0 ? x - band.right : x - band.left;
    };
    std::int64_t lo = band.left < 0 ? -kNone : lower_at(qpos), hi = band.right < 0 ? kNone : qpos + band.right;
    const std::int64_t call_first_lower = band.left < 0 ? 0 : lower_at(qpos - (row_.token - call_.s));
    if (band.left >= 0 && !r_.lower_edge.is_spec()) {
      const EdgeRule& e = r_.lower_edge;
      const std::int64_t bound = rounded(e, lower_at(qpos + anchor_offset(e)), false, key_origin(e, call_first_lower));
      lo = e.masked ? std::max(lo, bound) : bound;
    }
    if (band.right >= 0 && !r_.upper_edge.is_spec()) {
      const EdgeRule& e = r_.upper_edge;
      const std::int64_t bound = rounded(e, qpos + anchor_offset(e) + band.right, true, key_origin(e, call_first_lower));
      hi = e.masked ? std::min(hi, bound) : bound;
    }
    if (r_.query_tile_upper_cap > 0) hi = std::min(hi, (row_.token / r_.query_tile_upper_cap + 1) * r_.query_tile_upper_cap - 1);
    const std::int64_t newest_cached = call_.decode ? row_.token : call_.s - 1;
    // A call that gathers its keys holds none before its first row's window start.
    const std::int64_t first_gathered = r_.keys_from_call_window && p_.mode != RunMode::prefill && band.left >= 0
                                            ? std::max<std::int64_t>(0, call_.s - band.left) : 0;
    for (std::int64_t j = first_gathered; j < available; ++j) {
      const bool cached = call_.decode || j < call_.s;
      if (p_.mode != RunMode::prefill && cached && j > newest_cached - r_.cache_newest_dropped) continue;
      const bool visible = j >= lo && j <= hi;
      const bool counted = !visible && (r_.denominator == DenominatorScope::call ||
                                        (r_.denominator == DenominatorScope::causal && j <= qpos));
      if (!visible && !counted && r_.max_scope != MaxScope::call) continue;
      if (!kv_row(j, k.data(), v.data())) continue;
      const double x = score(k.data());
      call_max_ = std::max(call_max_, x);
      if (!visible && !counted) continue;
      if (visible) {
        uncapped_max_ = std::max(uncapped_max_, last_uncapped_);
        positions_.push_back(j);
        scores_.push_back(x);
        values_.insert(values_.end(), v.begin(), v.end());
      } else {
        extra_.push_back(x);
      }
    }
    if (r_.padded_key_tile > 0) {
      // The last tile's padding past the keys the call holds: zero K (score 0, capped or not) and zero V.
      const std::int64_t t = r_.padded_key_tile;
      const std::int64_t origin = r_.padded_grid == TileGrid::call ? std::max<std::int64_t>(0, call_first_lower) : 0;
      const std::int64_t padded_end = origin + (available - origin + t - 1) / t * t;
      for (std::int64_t j = available; j < padded_end; ++j)
        if (j >= lo && j <= hi) {
          positions_.push_back(j);
          scores_.push_back(0.0);
          values_.insert(values_.end(), static_cast<std::size_t>(p_.head_size), 0.0);
        }
    }
    softmax(out);
  }

 private:
  void load(const void* base, std::int64_t row_stride, std::int64_t head_stride, std::int64_t row, int head,
            double* out, bool head_major = false, int heads = 1) const {
    if (head_major) {
      // Element (row, head) of a [heads, nTokens, D] reading sits where the packed layout keeps
      // (flat / heads, flat % heads), flat = head * nTokens + row.
      const std::int64_t flat = head * total_tokens(p_) + row;
      row = flat / heads;
      head = static_cast<int>(flat % heads);
    }
    const auto* first = static_cast<const unsigned char*>(base) + (row * row_stride + head * head_stride) * dtype_bytes(p_.dtype);
    for (int d = 0; d < p_.head_size; ++d) out[d] = load_from(p_.dtype, first + d * dtype_bytes(p_.dtype));
  }

  // The row a decode step at position t reads (and stores) as its own.
  std::int64_t decode_source(std::int64_t t) const {
    const std::int64_t len = p_.seq_lens[row_.sequence], prompt = prompt_len(p_, row_.sequence);
    switch (r_.decode_row) {
      case DecodeRow::own: return t;
      case DecodeRow::sequence_last: return len - 1;
      case DecodeRow::previous: return std::max<std::int64_t>(0, t - 1);
      case DecodeRow::prompt_last: return std::max<std::int64_t>(0, prompt - 1);
    }
    return t;
  }

  // Position j's K and V as the reading holds them: through its ring, then its FP8. False when the
  // slot it reads was never written: a kernel that masks by the slot's position skips it, as the
  // golden's cache model does.
  bool kv_row(std::int64_t j, double* k, double* v) const {
    std::int64_t held = j;
    const bool own_chunk_key = !call_.decode && j >= call_.s;
    const bool written_first = r_.chunk_written_before_read && !call_.decode;
    // With ring_reads_slots a ring is read as a kernel that reads it reads it: a key the reading
    // reaches for (one past the window, a masked key it counts) is whatever its slot holds, e.g. the
    // step's own key one ring later. Without, such a key is the input's (a kernel that keeps them).
    const bool own_step_key_kept = r_.ring_read_own_key_kept && call_.decode && j == row_.token;
    if (ring(p_) && !own_chunk_key && !own_step_key_kept &&
        (r_.ring_reads_slots || r_.ring_capacity_delta != 0 || r_.ring_read_shift != 0 || written_first ||
         r_.ring_read_without_base || r_.ring_read_in_slot_order)) {
      const std::int64_t capacity = std::max<std::int64_t>(1, p_.band.left + 1 + r_.ring_capacity_delta);
      const std::int64_t prompt = prompt_len(p_, row_.sequence);
      const std::int64_t first_write = p_.chunk > 0 ? std::min<std::int64_t>(p_.chunk, prompt) : prompt;
      const RingGeometry g{capacity, p_.cache == CachePolicy::ring_compact ? compact_ring_base(first_write, capacity) : 0};
      // A prompt call that stores its rows first reads slots that already hold them.
      const std::int64_t newest = call_.decode ? row_.token : written_first ? call_.e - 1 : call_.s - 1;
      const RingGeometry read = r_.ring_read_without_base ? RingGeometry{capacity, 0} : g;
      const std::int64_t gathered = j - (p_.band.left < 0 ? 0 : std::max<std::int64_t>(0, call_.s - p_.band.left));
      const std::int64_t base_slot = r_.ring_read_in_slot_order && !call_.decode ? gathered % capacity : ring_slot(read, j);
      const std::int64_t slot = (base_slot + r_.ring_read_shift % capacity + capacity) % capacity;
      held = ring_slot_position(g, slot, newest);
    } else if (p_.mode != RunMode::prefill && !own_chunk_key && r_.ring_read_shift != 0) {
      // A linear (or paged) cache keeps position p at p: a read one slot off finds its neighbour, or
      // nothing past the newest.
      const std::int64_t newest = call_.decode ? row_.token : call_.s - 1;
      held = j + r_.ring_read_shift;
      if (held > newest) held = -1;
    }
    if (call_.decode && j == row_.token && r_.decode_reads_before_write) {
      // The step's own slot still holds what it held before the write: in a ring the position a full
      // ring earlier, in a linear or paged cache nothing.
      held = -1;
      if (ring(p_)) {
        const RingGeometry g{p_.band.left + 1, 0};
        held = p_.cache == CachePolicy::ring_modulo ? ring_slot_position(g, ring_slot(g, j), j - 1) : -1;
      }
    }
    if (held < 0) return false;
    // A prompt call that read its own K/V rows from the sequence's row (position - call start) stored them too.
    if (r_.kv_rows_from_call_start && p_.mode != RunMode::prefill && held < prompt_len(p_, row_.sequence))
      held -= call_of(p_, row_.sequence, held).s;
    // What a decode step stored at its position is the row it read as its own.
    if (p_.mode == RunMode::decode && held >= prompt_len(p_, row_.sequence)) held = decode_source(held);
    const std::int64_t row = p_.seq_offsets[row_.sequence] + held;
    load(p_.k, p_.k_row_stride, p_.k_head_stride, row, kvh_, k, r_.kv_head_major, p_.heads_kv);
    load(p_.v, p_.v_row_stride, p_.v_head_stride, row, kvh_, v, r_.kv_head_major, p_.heads_kv);
    for (int d = 0; d < p_.head_size && (r_.round_keys || r_.round_values); ++d) {
      if (r_.round_keys) k[d] = round_to(rounding_type(), static_cast<float>(k[d]));
      if (r_.round_values) v[d] = round_to(rounding_type(), static_cast<float>(v[d]));
    }
    if (!is_fp8(p_.kv_format) || (r_.fp8_chunk_keys_unquantised && own_chunk_key)) return true;
    if (r_.fp8_decode_key_unquantised && call_.decode && j == row_.token) return true;
    for (int d = 0; d < p_.head_size; ++d) {
      k[d] = decoded(p_, r_, true, k[d], !own_chunk_key);
      v[d] = decoded(p_, r_, false, v[d], !own_chunk_key);
    }
    return true;
  }

  double score(const double* k) {
    double dot = 0;
    const int dims = r_.qk_dims > 0 ? std::min(r_.qk_dims, p_.head_size) : p_.head_size;
    for (int d = 0; d < dims; ++d) dot += q_[d] * k[d];
    last_uncapped_ = scale_ * dot;
    double x = r_.cap_before_scale && cap_ > 0 ? scale_ * cap_ * std::tanh(dot / cap_) : scale_ * dot;
    if (!r_.cap_before_scale && cap_ > 0) x = cap_ * std::tanh(x / cap_);
    if (r_.cap_twice && cap_ > 0) x = cap_ * std::tanh(x / cap_);
    return r_.round_scores ? round_to(rounding_type(), static_cast<float>(x)) : x;
  }

  // The sink logit, or NaN when the row has none.
  double sink() const {
    const double s = r_.sink_factor * sink_by_rule();
    return r_.round_sink && !std::isnan(s) ? round_to(rounding_type(), static_cast<float>(s)) : s;
  }
  DType rounding_type() const { return r_.round_type == DType::fp32 ? p_.dtype : r_.round_type; }
  double sink_by_rule() const {
    if (!p_.sinks || r_.sink == SinkRule::ignored) return std::numeric_limits<double>::quiet_NaN();
    const int group = p_.heads_q / p_.heads_kv, h = row_.head;
    const double own = p_.sinks[h];
    switch (r_.sink) {
      case SinkRule::kv_head: return p_.sinks[h / group];
      case SinkRule::modulo: return p_.sinks[h % p_.heads_kv];
      case SinkRule::first: return p_.sinks[0];
      case SinkRule::scaled: return own * scale_;
      case SinkRule::capped: return cap_ > 0 ? cap_ * std::tanh(own / cap_) : own;
      case SinkRule::negated: return -own;
      default: return own;
    }
  }

  double base(double x) const {
    if (r_.max_from_zero || r_.max_scope != MaxScope::visible)  // weights in fp32, so what the max does not bring near 0 underflows
      return static_cast<double>(r_.exp2 ? std::exp2(static_cast<float>(x)) : std::exp(static_cast<float>(x)));
    return r_.exp2 ? std::exp2(x) : std::exp(x);
  }

  void softmax(double* out) {
    const int dims = p_.head_size;
    std::fill(out, out + dims, 0.0);
    const double sigma = sink();
    const bool has_sink = !std::isnan(sigma);
    const std::size_t n = scores_.size();
    if (n == 0 && !has_sink) return;
    if (r_.no_max_fp32) {
      float l = has_sink ? std::exp(static_cast<float>(sigma)) : 0.f;
      std::vector<float> acc(dims, 0.f);
      for (std::size_t j = 0; j < n; ++j) {
        const float w = std::exp(static_cast<float>(scores_[j]));
        l += w;
        for (int d = 0; d < dims; ++d) acc[d] += w * static_cast<float>(values_[j * dims + d]);
      }
      for (const double x : extra_) l += std::exp(static_cast<float>(x));
      for (int d = 0; d < dims; ++d) out[d] = acc[d] / l;
      return;
    }
    if ((r_.splits > 1 || r_.split_size > 0) && n > 0) return split_softmax(sigma, out);
    if (r_.state_tile != 0) return narrow_state_softmax(sigma, out);
    double m = has_sink ? sigma : -std::numeric_limits<double>::infinity();
    if (r_.max_from_zero) m = 0;
    for (const double x : scores_) m = std::max(m, x);
    for (const double x : extra_) m = std::max(m, x);
    if (r_.max_scope == MaxScope::uncapped) m = std::max(m, uncapped_max_);
    if (r_.max_scope == MaxScope::call) m = std::max(m, call_max_);
    // Each key's weight against the max the reading holds when it weighs it.
    std::vector<double> numerator_max(n, m);
    if (r_.tile > 0 && r_.tile_rescale != TileRescale::exact) {
      double running = r_.tile_rescale == TileRescale::inverted && has_sink ? sigma : -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < n;) {
        const std::int64_t t = positions_[j] / r_.tile;
        std::size_t e = j;
        while (e < n && positions_[e] / r_.tile == t) running = std::max(running, scores_[e++]);
        for (; j < e; ++j) numerator_max[j] = running;
      }
    }
    // Weighed against the max it held then (not rescaled), or against the final max.
    const bool stale_output = r_.tile_rescale == TileRescale::output_not_rescaled ||
                              r_.tile_rescale == TileRescale::neither_rescaled;
    const bool stale_sum = r_.tile_rescale == TileRescale::row_sum_not_rescaled ||
                           r_.tile_rescale == TileRescale::neither_rescaled;
    double l = 0;
    for (std::size_t j = 0; j < n; ++j) {
      // With the factor inverted, every later growth d of the max multiplies the weight by e^d, not e^-d.
      const double spec_weight = r_.tile_rescale == TileRescale::inverted ? base(scores_[j] - 2 * numerator_max[j] + m)
                                                                          : base(scores_[j] - m);
      const double stale = base(scores_[j] - numerator_max[j]);
      l += stale_sum ? stale : spec_weight;
      if (r_.max_scope != MaxScope::visible) l = static_cast<float>(l);
      const double w = stale_output ? stale : spec_weight;
      const double p = r_.round_probabilities ? round_to(rounding_type(), static_cast<float>(w)) : w;
      // Weights that may be fp32 subnormals are multiplied and summed in fp32, as the kernel does:
      // in fp64 their products would keep digits the kernel's lose.
      const bool fp32_weights = r_.max_scope != MaxScope::visible;
      for (int d = 0; d < dims; ++d) {
        const double sum = fp32_weights ? static_cast<double>(static_cast<float>(out[d]) +
                                                              static_cast<float>(p) * static_cast<float>(values_[j * dims + d]))
                                        : out[d] + p * values_[j * dims + d];
        out[d] = r_.accumulate_in_dtype ? round_to(rounding_type(), static_cast<float>(sum)) : sum;
      }
    }
    for (const double x : extra_) l += base(x - m);
    // A seeded sink is rescaled with the rest: inverted, its weight grows by what the max grew.
    const double sink_weight = !has_sink ? 0.0 : r_.tile_rescale == TileRescale::inverted && r_.tile > 0 ? base(m - sigma) : base(sigma - m);
    l += r_.sink == SinkRule::doubled_mass ? 2 * sink_weight : sink_weight;
    if (r_.round_row_sum) l = round_to(rounding_type(), static_cast<float>(l));
    // Every weight underflowed below a max the row's keys never reach: the kernel's acc / l is 0 / 0.
    if (!(l > 0) && r_.max_scope != MaxScope::visible) return std::fill(out, out + dims, std::numeric_limits<double>::quiet_NaN());
    if (!(l > 0)) return std::fill(out, out + dims, 0.0);
    for (int d = 0; d < dims; ++d) out[d] = out[d] / l + (r_.sink == SinkRule::in_numerator ? sink_weight / l : 0.0);
  }

  // The online softmax tile by tile, its state (m, l, acc) updated per tile and l and/or acc held in
  // the rounding type after each update, as a kernel with a narrow running state does.
  void narrow_state_softmax(double sigma, double* out) const {
    const int dims = p_.head_size;
    const std::size_t n = scores_.size();
    const DType type = rounding_type();
    std::vector<std::pair<std::size_t, std::size_t>> tiles;  // [first, end) in the row's keys
    // Two stages: the keys before the call's first row (its own decode key is the newest), then the rest.
    const std::int64_t stage = call_.decode ? row_.token : call_.s;
    auto tile_of = [&](std::int64_t pos) { return r_.state_tile < 0 ? std::int64_t{pos >= stage} : pos / r_.state_tile; };
    for (std::size_t j = 0; j < n;) {
      std::size_t e = j;
      while (e < n && tile_of(positions_[e]) == tile_of(positions_[j])) ++e;
      tiles.push_back({j, e});
      j = e;
    }
    if (r_.state_newest_first) std::reverse(tiles.begin(), tiles.end());
    if (r_.normalized_update != NormalizedUpdate::none) return normalized_softmax(tiles, sigma, out);
    double m = -std::numeric_limits<double>::infinity(), l = 0;
    std::vector<double> acc(dims, 0.0);
    auto hold = [&](double x) { return round_to(type, static_cast<float>(x)); };
    auto update = [&](double m_new) {
      const double f = std::isinf(m) ? 0.0 : base(m - m_new);
      l *= f;
      for (double& a : acc) a *= f;
      m = m_new;
    };
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      const auto [a, z] = tiles[i];
      // Two stages: the state spilled between them, once (the second stage's result is the output's).
      const bool spill = r_.state_tile > 0 || i + 1 < tiles.size();
      double m_new = m;
      for (std::size_t j = a; j < z; ++j) m_new = std::max(m_new, scores_[j]);
      update(m_new);
      for (std::size_t j = a; j < z; ++j) {
        const double w = base(scores_[j] - m);
        l += w;
        for (int d = 0; d < dims; ++d) acc[d] += w * values_[j * dims + d];
      }
      if (r_.state_round_sum && spill) l = hold(l);
      if (r_.state_round_acc && spill)
        for (double& x : acc) x = hold(x);
    }
    if (!std::isnan(sigma)) {
      update(std::max(m, sigma));
      l += base(sigma - m);
      if (r_.state_round_sum && r_.state_tile > 0) l = hold(l);
    }
    for (int d = 0; d < dims; ++d) out[d] = l > 0 ? acc[d] / l : 0.0;
  }

  // FlashAttention-1's online softmax: the output normalised after every tile, the sink seeding the
  // state; one factor of its update left out where the reading says.
  void normalized_softmax(const std::vector<std::pair<std::size_t, std::size_t>>& tiles, double sigma, double* out) const {
    const int dims = p_.head_size;
    const bool has_sink = !std::isnan(sigma);
    double m = has_sink ? sigma : -std::numeric_limits<double>::infinity(), l = has_sink ? 1.0 : 0.0;
    std::vector<double> o(dims, 0.0), pv(dims);
    for (const auto& [a, z] : tiles) {
      double m_new = m;
      for (std::size_t j = a; j < z; ++j) m_new = std::max(m_new, scores_[j]);
      if (std::isinf(m_new)) continue;
      const double alpha = std::isinf(m) ? 0.0 : base(m - m_new);
      double sum = 0;
      std::fill(pv.begin(), pv.end(), 0.0);
      for (std::size_t j = a; j < z; ++j) {
        const double w = base(scores_[j] - m_new);
        sum += w;
        for (int d = 0; d < dims; ++d) pv[d] += w * values_[j * dims + d];
      }
      const double l_new = alpha * l + sum;
      const double keep = r_.normalized_update == NormalizedUpdate::row_sum_dropped   ? alpha
                          : r_.normalized_update == NormalizedUpdate::rescale_dropped ? l
                                                                                      : alpha * l;
      for (int d = 0; d < dims; ++d) o[d] = l_new > 0 ? (keep * o[d] + pv[d]) / l_new : 0.0;
      m = m_new, l = l_new;
    }
    std::copy(o.begin(), o.end(), out);
  }

  void split_softmax(double sigma, double* out) const {
    const int dims = p_.head_size;
    const bool has_sink = !std::isnan(sigma);
    const std::size_t n = scores_.size();
    std::size_t n_parted = n;
    // The parts' bounds in the row's keys: equal counts, or aligned position ranges.
    std::vector<std::size_t> bounds = {0};
    if (r_.split_size > 0) {
      for (std::size_t j = 1; j < n; ++j)
        if (positions_[j] / r_.split_size != positions_[j - 1] / r_.split_size) bounds.push_back(j);
    } else if (r_.splits_drop_remainder) {
      const std::size_t parts = static_cast<std::size_t>(r_.splits), size = n / parts;
      if (size == 0) {  // every key in no part: the sink's share alone, which holds no value
        std::fill(out, out + dims, 0.0);
        return;
      }
      for (std::size_t i = 1; i < parts; ++i) bounds.push_back(i * size);
      n_parted = parts * size;
    } else if (r_.splits_even) {
      const std::size_t parts = std::min<std::size_t>(static_cast<std::size_t>(r_.splits), n);
      for (std::size_t i = 1, at = 0; i < parts; ++i) bounds.push_back(at += n / parts + (i - 1 < n % parts ? 1 : 0));
    } else {
      const std::size_t parts = static_cast<std::size_t>(r_.splits), size = (n + parts - 1) / parts;
      for (std::size_t a = size; a < n; a += size) bounds.push_back(a);
    }
    bounds.push_back(n_parted);
    struct Part {
      double m, l;
      std::vector<double> o;
    };
    std::vector<Part> ps;
    for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
      const std::size_t a = bounds[i], z = bounds[i + 1];
      Part part{-std::numeric_limits<double>::infinity(), 0.0, std::vector<double>(dims, 0.0)};
      for (std::size_t j = a; j < z; ++j) part.m = std::max(part.m, scores_[j]);
      for (std::size_t j = a; j < z; ++j) {
        const double w = base(scores_[j] - part.m);
        part.l += w;
        for (int d = 0; d < dims; ++d) part.o[d] += w * values_[j * dims + d];
      }
      for (int d = 0; d < dims; ++d) part.o[d] /= part.l;
      ps.push_back(std::move(part));
    }
    std::fill(out, out + dims, 0.0);
    const double sink_term = has_sink ? 1.0 : 0.0;
    switch (r_.merge) {
      case SplitMerge::mean:
        for (const Part& part : ps)
          for (int d = 0; d < dims; ++d) out[d] += part.o[d] / static_cast<double>(ps.size());
        return;
      case SplitMerge::last_part: {
        const Part& last = ps.back();
        const double sink_w = has_sink ? base(sigma - last.m) : 0.0;
        for (int d = 0; d < dims; ++d) out[d] = last.o[d] * last.l / (last.l + sink_w);
        return;
      }
      case SplitMerge::without_row_sums: {
        double M = has_sink ? sigma : -std::numeric_limits<double>::infinity();
        for (const Part& part : ps) M = std::max(M, part.m);
        double L = has_sink ? base(sigma - M) : 0.0;
        for (const Part& part : ps) L += base(part.m - M);
        for (const Part& part : ps)
          for (int d = 0; d < dims; ++d) out[d] += base(part.m - M) * part.o[d] / L;
        return;
      }
      case SplitMerge::max_not_shared: {
        double l = 0, mmax = -std::numeric_limits<double>::infinity();
        for (const Part& part : ps) l += part.l, mmax = std::max(mmax, part.m);
        if (has_sink) l += base(sigma - mmax);
        for (const Part& part : ps)
          for (int d = 0; d < dims; ++d) out[d] += part.l * part.o[d] / l;
        return;
      }
      default: {
        double M = has_sink ? sigma : -std::numeric_limits<double>::infinity();
        for (const Part& part : ps) M = std::max(M, part.m);
        double L = 0;
        for (const Part& part : ps) {
          L += part.l * base(part.m - M);
          if (r_.merge == SplitMerge::sink_per_part) L += sink_term * base(sigma - M);
        }
        if (r_.merge != SplitMerge::sink_per_part && has_sink) L += base(sigma - M);
        for (const Part& part : ps)
          for (int d = 0; d < dims; ++d) out[d] += part.l * base(part.m - M) * part.o[d] / L;
      }
    }
  }

  const AttnParams& p_;
  const Reading& r_;
  RowRef row_;
  Call call_;
  int kvh_ = 0;
  double scale_ = 0, cap_ = 0;
  std::vector<double> q_;
  std::vector<std::int64_t> positions_;
  std::vector<double> scores_, values_, extra_;
  double last_uncapped_ = 0;
  double uncapped_max_ = -std::numeric_limits<double>::infinity(), call_max_ = -std::numeric_limits<double>::infinity();
};

}  // namespace

int head_source(HeadMap map, int head, int heads_q, int heads_kv) {
  const int group = heads_kv > 0 ? heads_q / heads_kv : 1;
  switch (map) {
    case HeadMap::identity: return head;
    case HeadMap::group_transposed: return (head % heads_kv) * group + head / heads_kv;
    case HeadMap::group_transposed_back: return (head % group) * heads_kv + head / group;
    case HeadMap::reversed: return heads_q - 1 - head;
    case HeadMap::rotated_up: return (head + 1) % heads_q;
    case HeadMap::rotated_down: return (head + heads_q - 1) % heads_q;
    case HeadMap::group_first: return head / group * group;
  }
  return head;
}

double fp8_round(KvFormat f, Fp8Rounding rounding, bool saturates, double x) {
  if (std::isnan(x)) return x;
  const int mantissa = f == KvFormat::fp8_e4m3 ? 3 : 2, min_exponent = f == KvFormat::fp8_e4m3 ? -6 : -14;
  const double max = fp8_max(f);
  const double a = std::fabs(x);
  if (a == 0) return x;
  double r;
  if (std::isinf(a)) {
    r = a;
  } else {
    const int e = std::max(std::ilogb(a), min_exponent);
    const double quantum = std::ldexp(1.0, e - mantissa), steps = a / quantum;
    double n = 0;
    switch (rounding) {
      case Fp8Rounding::nearest_even: n = std::nearbyint(steps); break;
      case Fp8Rounding::toward_zero: n = std::trunc(steps); break;
      case Fp8Rounding::ties_away: n = std::round(steps); break;
    }
    r = n * quantum;
  }
  if (r > max) r = saturates ? max : (f == KvFormat::fp8_e4m3 ? std::numeric_limits<double>::quiet_NaN()
                                                               : std::numeric_limits<double>::infinity());
  return std::signbit(x) ? -r : r;
}

std::vector<double> read_rows(const AttnParams& p, const Reading& reading, const std::vector<RowRef>& rows) {
  validate(p);
  static const Reading spec;
  std::vector<double> out(rows.size() * static_cast<std::size_t>(p.head_size));
#pragma omp parallel for schedule(dynamic, 4)
  for (std::size_t i = 0; i < rows.size(); ++i) {
    RowRef row = rows[i];
    if (reading.out_head_major && reading.out_head_major_per_call) {
      // Each call's rows [s, e) of its sequence written as [heads, e - s, D] over the same memory.
      const Call c = call_of(p, row.sequence, row.token);
      if (in_scope(reading.scope, c)) {
        const std::int64_t m = c.e - c.s, flat = (row.token - c.s) * p.heads_q + row.head;
        row.token = c.s + flat % m;
        row.head = static_cast<int>(flat / m);
      }
    } else if (reading.out_head_major) {
      // The kernel wrote its row (token, head) at flat row head * nTokens + token of the packed output.
      const std::int64_t flat = (p.seq_offsets[row.sequence] + row.token) * p.heads_q + row.head, n = total_tokens(p);
      const std::int64_t token = flat % n;
      row.head = static_cast<int>(flat / n);
      row.sequence = 0;
      while (row.sequence + 1 < p.batch && p.seq_offsets[row.sequence + 1] <= token) ++row.sequence;
      row.token = token - p.seq_offsets[row.sequence];
    }
    const Reading& r = in_scope(reading.scope, call_of(p, row.sequence, row.token)) ? reading : spec;
    row.head = head_source(r.out_heads, row.head, p.heads_q, p.heads_kv);
    RowModel(p, r, row).compute(&out[i * p.head_size]);
  }
  return out;
}

std::vector<double> read_all(const AttnParams& p, const Reading& reading) {
  std::vector<RowRef> rows;
  for (int b = 0; b < p.batch; ++b)
    for (std::int64_t t = 0; t < p.seq_lens[b]; ++t)
      for (int h = 0; h < p.heads_q; ++h) rows.push_back({b, t, h});
  return read_rows(p, reading, rows);
}

}  // namespace swa::golden
