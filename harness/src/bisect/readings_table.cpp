// The readings bisect searches: one table (readings_table.hpp).
#include "readings_table.hpp"

#include "readings_edges.hpp"
#include "readings_precision.hpp"
#include "swa/dtype.hpp"

#include <cmath>
#include <sstream>

namespace swa::harness {
namespace {

using golden::Reading;
using Settings = std::vector<ReadingSetting>;

// The table's settings are written as setting(class, words, change).
auto& setting = reading_setting;

bool is_ring(const AttnParams& p) {
  return p.mode != RunMode::prefill && (p.cache == CachePolicy::ring_modulo || p.cache == CachePolicy::ring_compact);
}
bool gqa(const AttnParams& p) { return p.heads_kv > 1 && p.heads_q != p.heads_kv; }

// A fitted value beside the spec's, each with as many digits as it takes to tell them apart (4 at
// least, 9 at most): "0.1250268 instead of 0.125 (x1.000214)", never "0.125 instead of 0.125 (x1)".
int digits_apart(double a, double b) {
  for (int digits = 4; digits < 9; ++digits) {
    std::ostringstream x, y;
    x.precision(digits);
    y.precision(digits);
    x << a;
    y << b;
    if (x.str() != y.str()) return digits;
  }
  return 9;
}

std::string number(double x, int digits) {
  std::ostringstream o;
  o.precision(digits);
  o << x;
  return o.str();
}

std::string number(double x) {
  std::ostringstream o;
  o.precision(4);
  o << x;
  return o.str();
}

// A fitted factor named when it is a familiar one (within 0.2%).
std::string factor_words(double r) {
  struct Known {
    double value;
    const char* words;
  };
  static const Known known[] = {{std::log(2.0), "ln 2: an exponent in base 2 where e is meant"},
                                {1 / std::log(2.0), "log2(e): the base-2 conversion applied twice"},
                                {std::sqrt(2.0), "sqrt(2)"}, {1 / std::sqrt(2.0), "1/sqrt(2)"}, {2.0, "2"}, {0.5, "1/2"},
                                {4.0, "4"}, {0.25, "1/4"}};
  for (const Known& k : known)
    if (std::abs(r / k.value - 1) < 2e-3) return k.words;
  return {};
}

std::string scale_words(double value, double spec) {
  std::ostringstream o;
  const int digits = digits_apart(value, spec);
  o << "scales the scores by " << number(value, digits) << " instead of " << number(spec, digits) << " (x"
    << number(value / spec, digits_apart(value / spec, 1));
  if (const std::string known = factor_words(value / spec); !known.empty()) o << " = " << known;
  const double n = 1 / (value * value);
  if (std::round(n) >= 1 && std::round(n) <= 4096 && std::abs(n - std::round(n)) < 0.01) o << "; " << number(value) << " = 1/sqrt(" << std::round(n) << ")";
  o << ")";
  return o.str();
}

std::string sink_factor_words(double value, double) {
  std::string w = "multiplies the sink logit by " + number(value);
  if (const std::string known = factor_words(value); !known.empty()) w += " (" + known + ")";
  return w;
}

std::string cap_words(double value, double spec) {
  const int digits = digits_apart(value, spec);
  return "soft-caps the scores at " + number(value, digits) + " instead of " + number(spec, digits) + " (x" +
         number(value / spec, digits_apart(value / spec, 1)) + ")";
}

}  // namespace

ReadingSetting reading_setting(std::string name, std::string words, const std::function<void(golden::Reading&)>& change) {
  golden::Reading r;
  change(r);
  return {std::move(name), std::move(words), r, change};
}

std::vector<std::pair<golden::CallScope, std::string>> scopes_of(const AttnParams& p) {
  using golden::CallScope;
  std::vector<std::pair<CallScope, std::string>> s = {{CallScope::every_call, ""}};
  if (p.mode == RunMode::prefill) return s;
  bool later_chunks = false;
  for (int b = 0; b < p.batch; ++b) later_chunks = later_chunks || (p.chunk > 0 && prompt_len(p, b) > p.chunk);
  if (p.mode == RunMode::decode) {
    s.push_back({CallScope::decode_steps, "in decode steps only"});
    s.push_back({CallScope::prompt_calls, "in prompt calls only, not in decode steps"});
  }
  if (later_chunks) s.push_back({CallScope::later_chunks, "in chunks after the first only"});
  return s;
}

const std::vector<ReadingKnob>& reading_knobs() {
  using namespace golden;
  static const std::vector<ReadingKnob> knobs = {
      {"scale", "the softmax scale: a value fitted in [scale/16, scale*16]", "wrong_scale", {},
       [](const AttnParams& p) -> std::optional<ContinuousKnob> {
         return ContinuousKnob{p.scale, p.scale / 16, p.scale * 16, [](Reading& r, double x) { r.scale = x; }};
       },
       scale_words, "wrong_scale"},
      {"softcap", "the soft-cap's value, fitted in [cap/16, cap*16] (cases with a cap)", "softcap_value_differs", {},
       [](const AttnParams& p) -> std::optional<ContinuousKnob> {
         if (p.softcap <= 0) return std::nullopt;
         return ContinuousKnob{p.softcap, p.softcap / 16, p.softcap * 16, [](Reading& r, double x) { r.softcap = x; }};
       },
       cap_words, "softcap_value_differs"},
      {"softcap_rule", "whether and where the cap applies", "softcap_ignored, softcap_before_scale, softcap_twice",
       [](const AttnParams& p) {
         if (p.softcap <= 0) return Settings{};
         return Settings{setting("softcap_ignored", "does not soft-cap the scores", [](Reading& r) { r.softcap = 0; }),
                         setting("softcap_before_scale", "caps q.k before the scale: cap * tanh(q.k / cap) * scale",
                                 [](Reading& r) { r.cap_before_scale = true; }),
                         setting("softcap_twice", "applies the cap twice: cap * tanh(tanh(s / cap))",
                                 [](Reading& r) { r.cap_twice = true; })};
       }},
      {"sink_factor", "the sink logit times a factor fitted in [1/16, 16] (cases with sinks)", "sink_scaled", {},
       [](const AttnParams& p) -> std::optional<ContinuousKnob> {
         if (!p.sinks) return std::nullopt;
         return ContinuousKnob{1.0, 1.0 / 16, 16.0, [](Reading& r, double x) { r.sink_factor = x; }};
       },
       sink_factor_words, "sink_scaled"},
      {"exponent", "the softmax's exponent base", "exp_base_two",
       [](const AttnParams&) {
         return Settings{setting("exp_base_two", "computes the softmax's exponent in base 2 (2^x where e^x is meant)",
                                 [](Reading& r) { r.exp2 = true; })};
       }},
      {"score_dims", "the dims q.k sums over: the first d only, d a block multiple below D", "scores_over_first_N_dims",
       [](const AttnParams& p) {
         Settings s;
         for (int d : {8, 16, 32, 48, 64, 96, 128, 192, 256, 512}) {
           if (d >= p.head_size) break;
           s.push_back(setting("scores_over_first_" + std::to_string(d) + "_dims",
                               "sums q.k over the first " + std::to_string(d) + " of the " + std::to_string(p.head_size) +
                                   " dims (the dims past " + std::to_string(d) + " left out of the scores: a partial last "
                                   "block of the contraction dropped, or a loop bound from another size)",
                               [d](Reading& r) { r.qk_dims = d; }));
         }
         return s;
       }},
      {"window_left", "the window's left edge: W-2 .. W+2 keys, L - R, or none", "window_plus_one, window_minus_one, window_left_off_by_N, window_left_from_right_edge, no_window",
       [](const AttnParams& p) {
         Settings s;
         if (p.band.left < 0) return s;
         for (int d : {1, -1, 2, -2}) {
           if (p.band.left + d < 0) continue;
           const std::string name = d == 1 ? "window_plus_one" : d == -1 ? "window_minus_one" : "window_left_off_by_" + std::to_string(d);
           s.push_back(setting(name, "attends " + std::string(d > 0 ? "W+" : "W") + std::to_string(d) + " keys on the left (the window's lower edge " + (d > 0 ? "+" : "") + std::to_string(d) + ")",
                               [d](Reading& r) { r.left_delta = d; }));
           if (d > 0 && is_ring(p))
             s.push_back(setting(name, "attends " + std::string("W+") + std::to_string(d) + " keys on the left, read through "
                                     "the ring (the extra slots hold newer positions: the call's own keys again)",
                                 [d](Reading& r) { r.left_delta = d, r.ring_reads_slots = true; }));
         }
         if (p.band.right > 0)
           s.push_back(setting("window_left_from_right_edge", "reads a two-sided window as a radius: R keys on each side",
                               [](Reading& r) { r.left_from_right = true; }));
         if (p.band.right > 0 && p.band.left - p.band.right >= 0) {
           const std::int64_t d = -p.band.right;
           s.push_back(setting("window_left_from_right_edge", "measures the left edge from the right one: a left bound of L - R",
                               [d](Reading& r) { r.left_delta = d; }));
         }
         s.push_back(setting("no_window", "ignores the window: plain causal attention", [](Reading& r) { r.window_ignored = true; }));
         return s;
       }},
      {"window_right", "a two-sided window's right edge: R-1, R+1, or causal", "window_right_off_by_one, window_right_minus_one, window_right_ignored",
       [](const AttnParams& p) {
         Settings s;
         if (p.band.right <= 0) return s;
         s.push_back(setting("window_right_off_by_one", "sees R+1 keys after the query", [](Reading& r) { r.right_delta = 1; }));
         s.push_back(setting("window_right_minus_one", "sees R-1 keys after the query", [](Reading& r) { r.right_delta = -1; }));
         s.push_back(setting("window_right_ignored", "ignores the right side of the window (causal)", [](Reading& r) { r.right_ignored = true; }));
         return s;
       }},
      {"cache_newest", "the newest cached positions: read before they are written, or not read (a chunk's previous last key, "
                       "a decode step's own key); a ring's chunk stored before the call reads the older keys",
       "cache_read_before_write, cache_newest_keys_dropped, chunk_written_before_read",
       [](const AttnParams& p) {
         Settings s;
         if (p.mode == RunMode::prefill) return s;
         if (is_ring(p))
           s.push_back(setting("chunk_written_before_read",
                               "stores a prompt call's rows in the ring before it reads the older keys (a slot the chunk "
                               "overwrote gives the chunk's key for the older position)",
                               [](Reading& r) { r.chunk_written_before_read = true; }));
         if (p.mode == RunMode::decode)
           s.push_back(setting("cache_read_before_write",
                               "reads a decode step's own slot before writing its key there (the slot's old row: a full ring "
                               "earlier, or nothing)",
                               [](Reading& r) { r.decode_reads_before_write = true; }));
         for (int n : {1, 2})
           s.push_back(setting("cache_newest_keys_dropped",
                               "does not read the newest " + std::to_string(n) + " position(s) in the cache (a chunk's previous " +
                                   "last key; a decode step's own new key)",
                               [n](Reading& r) { r.cache_newest_dropped = n; }));
         return s;
       }},
      {"query_position", "the query's position the mask uses: +-1, +-2, or counted from its call's first row",
       "query_position_off_by_N, query_position_from_call_start",
       [](const AttnParams& p) {
         Settings s;
         for (int d : {1, -1, 2, -2})
           s.push_back(setting("query_position_off_by_" + std::to_string(d),
                               "masks each query as if it sat at its position " + std::string(d > 0 ? "+ " : "- ") + std::to_string(std::abs(d)),
                               [d](Reading& r) { r.query_offset = d; }));
         if (p.mode != RunMode::prefill)
           s.push_back(setting("query_position_from_call_start",
                               "masks each query by its row within the call (its position counted from the call's first row)",
                               [](Reading& r) { r.query_from_call_start = true; }));
         if (p.mode != RunMode::prefill && p.band.left >= 0)
           s.push_back(setting("query_position_from_call_start",
                               "masks each query by its row within the call (its position counted from the call's first row), "
                               "among the keys the call gathers (from its first row's window start on)",
                               [](Reading& r) { r.query_from_call_start = true, r.keys_from_call_window = true; }));
         return s;
       }},
      {"edges", "the window's edges as a tiled kernel computes them: from the first or last row of the row's query "
                "tile or call instead of its own, rounded down or up to a key tile, with or without the row's own mask "
                "inside; tiles aligned to position 0 or (chunks, decode) to the call's first row and first visible key; "
                "the last key tile's padding attended",
       "window_edge_from_call_start, window_edge_per_key_tile, window_edge_per_query_tile, window_edge_per_call, "
       "future_keys_in_query_tile, future_keys_in_call, future_keys_in_key_tile, diagonal_key_tile_dropped, "
       "upper_edge_per_query_tile, upper_edge_per_call, right_keys_stop_at_query_tile, padded_keys_attended",
       [](const AttnParams& p) {
         // The one-field rules first: of readings that reproduce alike, the first in the table is told.
         Settings s;
         if (p.band.right > 0)
           for (int t : kEdgeTiles)
             s.push_back(setting("right_keys_stop_at_query_tile",
                                 "sees no key past the end of its " + std::to_string(t) + "-row query tile (the right side cut at the tile)",
                                 [t](Reading& r) { r.query_tile_upper_cap = t; }));
         for (ReadingSetting& e : edge_settings(p)) s.push_back(std::move(e));
         // The last key tile's padding, where a band that reaches past the last key sees it.
         if (p.band.right != 0) {
           std::vector<golden::TileGrid> grids = {golden::TileGrid::absolute};
           if (p.mode != RunMode::prefill) grids.push_back(golden::TileGrid::call);
           for (const golden::TileGrid g : grids)
             for (int t : kEdgeTiles)
               s.push_back(setting("padded_keys_attended",
                                   "attends the padding of its last " + std::to_string(t) + "-key tile" +
                                       (g == golden::TileGrid::call ? " of the call's keys" : "") +
                                       " as keys of score 0 and value 0 (the tile loaded padded, not bounds-masked)",
                                   [t, g](Reading& r) { r.padded_key_tile = t, r.padded_grid = g; }));
         }
         return s;
       }},
      {"decode_row", "the row a decode step reads as its own Q, K and V (and stores)", "decode_reads_another_row",
       [](const AttnParams& p) {
         if (p.mode != RunMode::decode) return Settings{};
         return Settings{setting("decode_reads_another_row", "reads every decode step's Q/K/V from the sequence's last packed row",
                                 [](Reading& r) { r.decode_row = DecodeRow::sequence_last; }),
                         setting("decode_reads_another_row", "reads a decode step's Q/K/V from the row before its own",
                                 [](Reading& r) { r.decode_row = DecodeRow::previous; }),
                         setting("decode_reads_another_row", "reads every decode step's Q/K/V from the prompt's last row",
                                 [](Reading& r) { r.decode_row = DecodeRow::prompt_last; })};
       }},
      {"kv_head", "the query-to-kv-head map", "gqa_modulo_mapping, kv_head_divided_by_kv_heads, kv_head_always_first",
       [](const AttnParams& p) {
         if (!gqa(p)) return Settings{};
         return Settings{setting("gqa_modulo_mapping", "maps query head h to kv head h % Hkv instead of h / (Hq/Hkv)",
                                 [](Reading& r) { r.kv_head = KvHeadRule::modulo; }),
                         setting("kv_head_divided_by_kv_heads", "maps query head h to kv head h / Hkv (the group size taken as Hkv)",
                                 [](Reading& r) { r.kv_head = KvHeadRule::divided_by_kv_heads; }),
                         setting("kv_head_always_first", "reads kv head 0 for every query head",
                                 [](Reading& r) { r.kv_head = KvHeadRule::first; })};
       }},
      {"sink", "the sink's index and how it joins the softmax",
       "sinks_ignored, sink_wrong_head, sink_scaled, sink_capped, sink_negated, sink_in_numerator, sink_counted_twice",
       [](const AttnParams& p) {
         Settings s;
         if (!p.sinks) return s;
         s.push_back(setting("sinks_ignored", "leaves the sink out of the softmax", [](Reading& r) { r.sink = SinkRule::ignored; }));
         if (gqa(p)) {
           s.push_back(setting("sink_wrong_head", "reads the sink of its kv head (sinks[h / group]) instead of its query head's",
                               [](Reading& r) { r.sink = SinkRule::kv_head; }));
           s.push_back(setting("sink_wrong_head", "reads sinks[h % Hkv] instead of sinks[h]", [](Reading& r) { r.sink = SinkRule::modulo; }));
         }
         if (p.heads_q > 1)
           s.push_back(setting("sink_wrong_head", "reads sinks[0] for every head", [](Reading& r) { r.sink = SinkRule::first; }));
         s.push_back(setting("sink_scaled", "multiplies the sink logit by the score scale", [](Reading& r) { r.sink = SinkRule::scaled; }));
         if (p.softcap > 0)
           s.push_back(setting("sink_capped", "soft-caps the sink logit as it caps the scores", [](Reading& r) { r.sink = SinkRule::capped; }));
         s.push_back(setting("sink_negated", "uses -sink as the sink logit", [](Reading& r) { r.sink = SinkRule::negated; }));
         s.push_back(setting("sink_in_numerator", "adds the sink's weight to the output as if the sink were a key of value 1",
                             [](Reading& r) { r.sink = SinkRule::in_numerator; }));
         s.push_back(setting("sink_counted_twice", "counts the sink's weight twice in the denominator",
                             [](Reading& r) { r.sink = SinkRule::doubled_mass; }));
         return s;
       }},
      {"ring", "a ring cache's slots: one slot short or long; read without the compact ring's base, or gathered in slot order",
       "ring_one_slot_short, ring_one_slot_long, ring_read_without_compact_base, ring_read_in_slot_order",
       [](const AttnParams& p) {
         if (!is_ring(p)) return Settings{};
         Settings s{setting("ring_one_slot_short", "keeps a ring of W-1 slots (position p in slot p mod (W-1))",
                            [](Reading& r) { r.ring_capacity_delta = -1; }),
                    setting("ring_one_slot_long", "keeps a ring of W+1 slots (position p in slot p mod (W+1))",
                            [](Reading& r) { r.ring_capacity_delta = 1; })};
         if (p.cache == CachePolicy::ring_compact) {
           s.push_back(setting("ring_read_without_compact_base",
                               "reads cached position p from slot p mod W, without the compact ring's base (it writes p to "
                               "(p - base) mod W)",
                               [](Reading& r) { r.ring_read_without_base = true; }));
           if (p.mode == RunMode::decode)
             s.push_back(setting("ring_read_without_compact_base",
                                 "reads cached position p from slot p mod W, without the compact ring's base (it writes p to "
                                 "(p - base) mod W), a decode step's own K/V taken as it holds them",
                                 [](Reading& r) { r.ring_read_without_base = r.ring_read_own_key_kept = true; }));
         }
         if (p.mode == RunMode::chunked_prefill || (p.mode == RunMode::decode && p.chunk > 0))
           s.push_back(setting("ring_read_in_slot_order",
                               "gathers a prompt call's cached keys from slots 0, 1, 2, ... in order, as if the ring had "
                               "never wrapped (the i-th key of the call's window from slot i), not each from its own slot",
                               [](Reading& r) { r.ring_read_in_slot_order = true; }));
         return s;
       }},
      {"cache_read", "a read of the KV cache one slot off (ring, linear or paged)", "cache_read_slot_shifted",
       [](const AttnParams& p) {
         if (p.mode == RunMode::prefill) return Settings{};
         return Settings{setting("cache_read_slot_shifted", "reads cached position p from the slot of p + 1 (writes it to p's)",
                                 [](Reading& r) { r.ring_read_shift = 1; }),
                         setting("cache_read_slot_shifted", "reads cached position p from the slot of p - 1 (writes it to p's)",
                                 [](Reading& r) { r.ring_read_shift = -1; })};
       }},
      {"heads", "a head index map on the Q a row reads or the output it writes: a GQA group's [Hkv, group] order "
                "transposed, the heads reversed or rotated, a group's first head for all",
       "out_heads_permuted, q_heads_permuted",
       [](const AttnParams& p) {
         Settings s;
         if (p.heads_q < 2) return s;
         const int group = p.heads_q / p.heads_kv;
         struct Map {
           HeadMap map;
           const char* out_words;
           const char* q_words;
           bool needs_groups;
         };
         const Map maps[] = {
             {HeadMap::group_transposed, "writes query head kv*group+g's output at head g*Hkv+kv (a [Hkv, group] result flattened as [group, Hkv])",
              "reads the Q of head kv*group+g for head g*Hkv+kv (Q's heads taken as [group, Hkv])", true},
             {HeadMap::group_transposed_back, "writes query head g*Hkv+kv's output at head kv*group+g (a [group, Hkv] result flattened as [Hkv, group])",
              "reads the Q of head g*Hkv+kv for head kv*group+g (Q's heads taken as [Hkv, group])", true},
             {HeadMap::reversed, "writes head H-1-h's output at head h (the heads reversed)", "reads head H-1-h's Q for head h", false},
             {HeadMap::rotated_up, "writes head h+1's output at head h (the heads shifted by one)", "reads head h+1's Q for head h", false},
             {HeadMap::rotated_down, "writes head h-1's output at head h (the heads shifted by one)", "reads head h-1's Q for head h", false},
             {HeadMap::group_first, "writes each GQA group's first head's output at every head of the group",
              "reads each GQA group's first head's Q for every head of the group", true}};
         for (const Map& m : maps) {
           if (m.needs_groups && !(gqa(p) && group > 1)) continue;
           if ((m.map == HeadMap::rotated_down || m.map == HeadMap::reversed) && p.heads_q == 2) continue;  // = rotated_up
           const HeadMap map = m.map;
           s.push_back(setting("out_heads_permuted", m.out_words, [map](Reading& r) { r.out_heads = map; }));
           s.push_back(setting("q_heads_permuted", m.q_words, [map](Reading& r) { r.q_heads = map; }));
         }
         return s;
       }},
      {"chunk_pointer", "a chunked-prefill call's Q or K/V pointer not advanced by the call's first row",
       "chunk_q_pointer_not_advanced, chunk_kv_pointer_not_advanced",
       [](const AttnParams& p) {
         Settings s;
         bool later_chunks = false;
         for (int b = 0; b < p.batch; ++b) later_chunks = later_chunks || (p.chunk > 0 && prompt_len(p, b) > p.chunk);
         if (p.mode == RunMode::prefill || !later_chunks) return s;
         s.push_back(setting("chunk_q_pointer_not_advanced",
                             "reads a chunk's Q from the sequence's first rows (row - call start), not the chunk's own",
                             [](Reading& r) { r.q_rows_from_call_start = true; }));
         s.push_back(setting("chunk_kv_pointer_not_advanced",
                             "reads (and stores) a chunk's own K/V from the sequence's first rows (position - call start), not the chunk's",
                             [](Reading& r) { r.kv_rows_from_call_start = true; }));
         return s;
       }},
      {"layout", "a packed [nTokens, heads, D] tensor read or written as [heads, nTokens, D]", "q_layout_head_major, kv_layout_head_major, out_layout_head_major",
       [](const AttnParams&) {
         return Settings{setting("q_layout_head_major", "reads Q as [heads, nTokens, D] instead of [nTokens, heads, D]",
                                 [](Reading& r) { r.q_head_major = true; }),
                         setting("kv_layout_head_major", "reads K and V as [heads, nTokens, D] instead of [nTokens, heads, D]",
                                 [](Reading& r) { r.kv_head_major = true; }),
                         setting("out_layout_head_major", "writes the output as [heads, nTokens, D] instead of [nTokens, heads, D]",
                                 [](Reading& r) { r.out_head_major = true; }),
                         setting("out_layout_head_major",
                                 "writes each call's output rows as [heads, rows, D] (a per-call buffer reshaped, not transposed)",
                                 [](Reading& r) { r.out_head_major = true, r.out_head_major_per_call = true; })};
       }},
      {"denominator", "the keys the softmax's denominator counts", "denominator_counts_masked_keys",
       [](const AttnParams& p) {
         Settings s;
         if (p.band.left >= 0)
           s.push_back(setting("denominator_counts_masked_keys",
                               "counts every key at or before the query in the softmax's denominator, the window's or not",
                               [](Reading& r) { r.denominator = DenominatorScope::causal; }));
         s.push_back(setting("denominator_counts_masked_keys",
                             "counts every key the call holds in the softmax's denominator, masked or not",
                             [](Reading& r) { r.denominator = DenominatorScope::call; }));
         if (p.mode != RunMode::prefill && p.band.left >= 0)
           s.push_back(setting("denominator_counts_masked_keys",
                               "counts every key the call gathers (from its first row's window start to its last row) in the "
                               "softmax's denominator, masked or not",
                               [](Reading& r) { r.denominator = DenominatorScope::call, r.keys_from_call_window = true; }));
         return s;
       }},
      {"online_softmax", "an online softmax over key tiles of 16..128 that does not rescale when the max grows, or that "
                         "keeps its output normalised per tile (FlashAttention-1) with a factor of the update left out",
       "tile_rescale_missing, row_sum_not_rescaled, tile_rescale_inverted, normalized_update_drops_the_old_row_sum, "
       "normalized_update_drops_the_max_rescale",
       [](const AttnParams&) {
         Settings s;
         for (int t : {16, 32, 64, 128}) {
           s.push_back(setting("row_sum_not_rescaled",
                               "does not rescale its row sum when a later key tile of " + std::to_string(t) +
                                   " raises the row max (the output accumulator is rescaled)",
                               [t](Reading& r) { r.tile = t, r.tile_rescale = TileRescale::row_sum_not_rescaled; }));
           s.push_back(setting("tile_rescale_missing",
                               "does not rescale its output accumulator when a later key tile of " + std::to_string(t) +
                                   " raises the row max (the row sum is rescaled)",
                               [t](Reading& r) { r.tile = t, r.tile_rescale = TileRescale::output_not_rescaled; }));
           s.push_back(setting("tile_rescale_missing",
                               "rescales neither its output nor its row sum when a later key tile of " + std::to_string(t) +
                                   " raises the row max",
                               [t](Reading& r) { r.tile = t, r.tile_rescale = TileRescale::neither_rescaled; }));
           s.push_back(setting("tile_rescale_inverted",
                               "rescales by e^(m_new - m_old) instead of e^(m_old - m_new) when a later key tile of " +
                                   std::to_string(t) + " raises the row max (the factor's sign flipped)",
                               [t](Reading& r) { r.tile = t, r.tile_rescale = TileRescale::inverted; }));
           s.push_back(setting("normalized_update_drops_the_old_row_sum",
                               "keeps its output normalised after every key tile of " + std::to_string(t) +
                                   " (FlashAttention-1's update) and computes o = (e^(m_old - m_new) o + P.V) / l_new: the "
                                   "old row sum l_old not multiplied back",
                               [t](Reading& r) { r.state_tile = t, r.normalized_update = NormalizedUpdate::row_sum_dropped; }));
           s.push_back(setting("normalized_update_drops_the_max_rescale",
                               "keeps its output normalised after every key tile of " + std::to_string(t) +
                                   " (FlashAttention-1's update) and computes o = (l_old o + P.V) / l_new: the max's growth "
                                   "e^(m_old - m_new) not applied to the output",
                               [t](Reading& r) { r.state_tile = t, r.normalized_update = NormalizedUpdate::rescale_dropped; }));
         }
         return s;
       }},
      {"split_kv", "a row's keys in 2..8 parts, or in aligned blocks of 16..128 positions (split-KV), merged another way, "
                   "or parts of floor(keys / n) that leave the newest keys in none",
       "split_kv_merge_wrong, split_kv_remainder_dropped",
       [](const AttnParams& p) {
         Settings s;
         for (int n : {2, 3, 4, 8})
           s.push_back(setting("split_kv_remainder_dropped",
                               "splits a row's keys in " + std::to_string(n) + " parts of floor(keys / " + std::to_string(n) +
                                   "), the last keys % " + std::to_string(n) + " (the newest) in no part",
                               [n](Reading& r) { r.splits = n, r.splits_drop_remainder = true; }));
         const std::pair<SplitMerge, const char*> merges[] = {
             {SplitMerge::mean, "averages the parts' outputs unweighted"},
             {SplitMerge::max_not_shared, "weighs each part by its row sum taken against its own max"},
             {SplitMerge::last_part, "keeps only the last part (its keys alone weighed, as a tile loop that skips the earlier tiles)"},
             {SplitMerge::sink_per_part, "adds the sink to every part's denominator"},
             {SplitMerge::without_row_sums, "weighs each part's normalised output by e^(m_i - M) alone (its row sum dropped)"}};
         for (const auto& [merge, words] : merges) {
           if (merge == SplitMerge::sink_per_part && !p.sinks) continue;
           const SplitMerge m = merge;
           for (int n : {2, 3, 4, 8}) {
             s.push_back(setting("split_kv_merge_wrong", "splits a row's keys in " + std::to_string(n) + " parts of ceil(keys / " +
                                     std::to_string(n) + ") and " + words,
                                 [n, m](Reading& r) { r.splits = n, r.merge = m; }));
             s.push_back(setting("split_kv_merge_wrong", "splits a row's keys in " + std::to_string(n) + " parts as even as possible and " + words,
                                 [n, m](Reading& r) { r.splits = n, r.splits_even = true, r.merge = m; }));
           }
           for (int size : {16, 32, 64, 128})
             s.push_back(setting("split_kv_merge_wrong",
                                 "splits a row's keys in aligned blocks of " + std::to_string(size) + " positions and " + words,
                                 [size, m](Reading& r) { r.split_size = size, r.merge = m; }));
         }
         return s;
       }},
      {"max", "the row max subtracted before the exponent: where it starts, what it is taken over (weights in fp32)",
       "no_max_subtraction, max_starts_at_zero, max_over_uncapped_scores, max_over_masked_keys",
       [](const AttnParams& p) {
         Settings s{setting("no_max_subtraction", "computes e^s in fp32 without subtracting the row max",
                            [](Reading& r) { r.no_max_fp32 = true; }),
                    setting("max_starts_at_zero",
                            "starts the running max at 0 instead of -inf (a row whose scores are all far below 0 "
                            "underflows in fp32)",
                            [](Reading& r) { r.max_from_zero = true; }),
                    setting("max_over_masked_keys",
                            "takes the row max over every key the call holds, masked or not (fp32 weights far below it underflow)",
                            [](Reading& r) { r.max_scope = MaxScope::call; })};
         if (p.softcap > 0)
           s.push_back(setting("max_over_uncapped_scores",
                               "takes the row max over the scores before the soft-cap while the exponent sees the capped ones "
                               "(fp32 weights far below it underflow)",
                               [](Reading& r) { r.max_scope = MaxScope::uncapped; }));
         return s;
       }},
      {"rounding", "where a value is rounded to the case's fp16/bf16 (the scores, P, the row sum, the P.V accumulator, "
                   "the sink logit), or in an fp32 case to fp16 or bf16 (a value held in a narrower type: those, or K or V)",
       "scores_rounded_to_dtype, probabilities_rounded_to_dtype, row_sum_rounded_to_dtype, fp16_pv_accumulation, "
       "sink_rounded_to_dtype, VALUE_rounded_to_fp16, VALUE_rounded_to_bf16, kv_stored_as_TYPE",
       rounding_settings},
      {"running_state", "an online softmax over key tiles whose running row sum or accumulator is held in fp16/bf16 "
                        "(the case's dtype, or in an fp32 case either), rounded after every tile (tiles walked either way) or "
                        "spilled between a call's two stages (the cache's keys, then its own)",
       "running_row_sum_in_TYPE_per_T_key_tile, running_accumulator_in_TYPE_per_T_key_tile, running_accumulator_in_TYPE_between_stages, running_state_in_TYPE_between_stages",
       running_state_settings},
      {"fp8", "FP8 K/V: the format, the rounding, saturation, each descale's use, which rows go through FP8",
       "fp8_other_format, fp8_rounds_toward_zero, fp8_rounds_ties_away, fp8_no_saturation, fp8_clamped_at_N, fp8_descales_in_TYPE, fp8_v_read_with_k_descale, "
       "fp8_k_read_with_v_descale, fp8_descale_twice, fp8_descale_not_applied, fp8_descale_inverted, fp8_chunk_keys_unquantised, "
       "fp8_decode_key_unquantised, fp8_encodes_by_reciprocal_in_TYPE",
       fp8_settings},
  };
  return knobs;
}

std::string reading_table_markdown() {
  std::ostringstream o;
  o << "| knob | what a kernel reads differently | classes |\n|---|---|---|\n";
  for (const ReadingKnob& k : reading_knobs()) o << "| `" << k.name << "` | " << k.meaning << " | " << k.classes << " |\n";
  return o.str();
}

}  // namespace swa::harness
