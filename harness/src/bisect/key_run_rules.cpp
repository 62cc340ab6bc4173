// The edge rules bisect fits to measured key runs (key_runs.cpp): where a row sits, and the first
// and last key a kernel can give it as functions of that (offsets, other rows' edges, tiles, calls).
#include "key_run_rules.hpp"

#include <algorithm>
#include <set>

namespace swa::harness::key_run_rules {

std::int64_t floor_to(std::int64_t x, std::int64_t t) { return (x >= 0 ? x / t : -((-x + t - 1) / t)) * t; }
std::int64_t ceil_to(std::int64_t x, std::int64_t t) { return floor_to(x + t - 1, t); }

RowPlace place(const AttnParams& p, int b, std::int64_t t, int h) {
  RowPlace r;
  r.b = b, r.t = t, r.h = h, r.n = p.seq_lens[b];
  const std::int64_t prompt = prompt_len(p, b);
  if (p.mode == RunMode::decode && t >= prompt) {
    r.decode = true;
    r.c0 = r.c1 = t;
  } else if (p.mode != RunMode::prefill) {
    const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
    r.chunked = true;
    r.c0 = t / chunk * chunk;
    r.c1 = std::min(r.c0 + chunk, prompt) - 1;
  } else {
    r.c0 = 0, r.c1 = r.n - 1;
  }
  r.last_key = p.mode == RunMode::prefill ? r.n - 1 : r.c1;
  r.packed = p.seq_offsets ? p.seq_offsets[b] : 0;
  return r;
}

std::int64_t spec_first_at(const AttnParams& p, std::int64_t x) { return p.band.left < 0 ? 0 : std::max<std::int64_t>(0, x - p.band.left); }
std::int64_t spec_last_at(const AttnParams& p, const RowPlace& r, std::int64_t x) {
  return p.band.right < 0 ? r.last_key : std::min(x + p.band.right, r.last_key);
}

namespace {

// The rows an edge may be taken from instead of the row itself: a query tile's first or last row
// (tiles on multiples of T of the sequence, or of the call), the call's first or last row.
struct Anchor {
  std::string name, words;
  std::function<std::int64_t(const RowPlace&)> at;
};

std::vector<Anchor> anchors(const std::vector<int>& tiles) {
  std::vector<Anchor> a;
  for (int T : tiles)
    for (const bool call_grid : {false, true}) {
      const std::string grid = call_grid ? "_of_call" : "";
      const std::string grid_words = call_grid ? " counted from its call's first row" : "";
      a.push_back({"query_tile_first_row_" + std::to_string(T) + grid,
                   "the first row of its " + std::to_string(T) + "-row query tile" + grid_words, [T, call_grid](const RowPlace& r) {
                     const std::int64_t origin = call_grid ? r.c0 : 0;
                     return std::max(r.c0, origin + floor_to(r.t - origin, T));
                   }});
      a.push_back({"query_tile_last_row_" + std::to_string(T) + grid,
                   "the last row of its " + std::to_string(T) + "-row query tile" + grid_words, [T, call_grid](const RowPlace& r) {
                     const std::int64_t origin = call_grid ? r.c0 : 0;
                     return std::min(r.c1, origin + floor_to(r.t - origin, T) + T - 1);
                   }});
    }
  a.push_back({"call_first_row", "its call's first row", [](const RowPlace& r) { return r.c0; }});
  a.push_back({"call_last_row", "its call's last row", [](const RowPlace& r) { return r.c1; }});
  return a;
}

std::string tile_words(const AttnParams& p, int T) {
  std::string w = "a multiple of " + std::to_string(T);
  if (p.cache == CachePolicy::paged && T == p.page_size) w += " (the page size)";
  if (p.mask_format == MaskFormat::swa_compress && T == p.mask_block) w += " (the mask block)";
  return w;
}

}  // namespace

std::vector<Edge> first_key_rules(const AttnParams& p, const std::vector<int>& tiles) {
  std::vector<Edge> e;
  e.push_back({"", "", 0, [&p](const RowPlace& r) { return spec_first_at(p, r.t); }});
  if (p.band.left >= 0) {
    for (int k = -8; k <= 8; ++k)
      if (k != 0)
        e.push_back({"first_key_" + std::to_string(std::abs(k)) + (k > 0 ? "_later" : "_earlier"),
                     "its first key is " + std::to_string(std::abs(k)) + (k > 0 ? " later" : " earlier") +
                         " than the window's (window_left read as " + std::to_string(p.band.left - k) + ")",
                     1 + (std::abs(k) > 1), [&p, k](const RowPlace& r) { return std::max<std::int64_t>(0, r.t - p.band.left + k); }});
    e.push_back({"first_key_unbounded", "its first key is the sequence's first: the window's left edge is not applied", 1,
                 [](const RowPlace&) { return std::int64_t{0}; }});
  }
  for (const Anchor& a : anchors(tiles))
    e.push_back({"first_key_from_" + a.name, "its first key is the window start of " + a.words + ", not its own", 2,
                 [&p, at = a.at](const RowPlace& r) { return spec_first_at(p, at(r)); }});
  for (int T : tiles) {
    e.push_back({"first_key_rounded_down_to_" + std::to_string(T),
                 "the window's first key is rounded down to " + tile_words(p, T) + " (keys below the window attended)", 2,
                 [&p, T](const RowPlace& r) { return floor_to(spec_first_at(p, r.t), T); }});
    // Key tiles on the packed batch's rows (a varlen kernel's key buffer): aligned to (row + packed) % T.
    e.push_back({"first_key_rounded_down_to_" + std::to_string(T) + "_of_packed_batch",
                 "the window's first key is rounded down to a " + std::to_string(T) + "-key tile of the packed batch's rows "
                 "(tiles on the batch's buffer, not the sequence's positions: keys below the window attended)", 3,
                 [&p, T](const RowPlace& r) { return std::max<std::int64_t>(0, floor_to(spec_first_at(p, r.t) + r.packed, T) - r.packed); }});
    e.push_back({"first_key_rounded_up_to_" + std::to_string(T) + "_of_packed_batch",
                 "the window's first key is rounded up to a " + std::to_string(T) + "-key tile of the packed batch's rows "
                 "(a partial first tile of the batch's buffer dropped)", 3,
                 [&p, T](const RowPlace& r) { return std::min(r.t + 1, ceil_to(spec_first_at(p, r.t) + r.packed, T) - r.packed); }});
    e.push_back({"oldest_key_tile_dropped_" + std::to_string(T),
                 "the " + std::to_string(T) + "-key tile holding the window's first key is dropped whole (tiles on " + tile_words(p, T) + ")", 2,
                 [&p, T](const RowPlace& r) { return floor_to(spec_first_at(p, r.t), T) + T; }});
    e.push_back({"first_key_rounded_up_to_" + std::to_string(T),
                 "the window's first key is rounded up to " + tile_words(p, T) + " (a partial first key tile dropped)", 2,
                 [&p, T](const RowPlace& r) { return std::min(r.t + 1, ceil_to(spec_first_at(p, r.t), T)); }});
  }
  if (p.band.left < 0)  // -1 means no left edge; read as an edge of -1 keys, the row sees nothing at or before it
    e.push_back({"first_key_after_its_own_window_left_minus_1_read_as_an_edge",
                 "window_left -1 (no left edge) read as a left edge: its first key is the one after its own (no key left)", 2,
                 [](const RowPlace& r) { return r.t + 1; }});
  if (p.band.left < 0 && p.mode == RunMode::decode)  // a decode step that attends its new token apart from the cache's keys
    e.push_back({"first_key_own_window_left_minus_1_read_as_an_edge",
                 "window_left -1 (no left edge) read as a left edge: every key before its own dropped, its own kept (a step "
                 "that attends its new token apart from the cached keys)", 2,
                 [](const RowPlace& r) { return r.t; }});
  if (p.mode != RunMode::prefill) {
    // A position taken as the row's index in its call (a mask row, a causal offset counted per call).
    e.push_back({"first_key_from_its_index_in_its_call",
                 "its first key is the window start of the position its index in its call gives (the call's first row "
                 "taken as position 0)", 2,
                 [&p](const RowPlace& r) { return spec_first_at(p, r.t - r.c0); }});
    e.push_back({"first_key_from_its_index_in_its_call_within_own",
                 "its first key is no earlier than the window start of the position its index in its call gives, its own "
                 "window kept inside it (a mask row picked by the index, its keys gathered by position)", 2,
                 [&p](const RowPlace& r) { return std::max(spec_first_at(p, r.t), spec_first_at(p, r.t - r.c0)); }});
    e.push_back({"first_key_at_most_call_start",
                 "the window's left edge holds for the keys before its call only: every earlier key of its own call is seen", 2,
                 [&p](const RowPlace& r) { return std::min(spec_first_at(p, r.t), r.c0); }});
    e.push_back({"first_key_at_least_call_start", "no key before its call's first row is read (the cached keys are dropped)", 2,
                 [&p](const RowPlace& r) { return std::max(spec_first_at(p, r.t), r.c0); }});
  }
  return e;
}

std::vector<Edge> last_key_rules(const AttnParams& p, const std::vector<int>& tiles) {
  std::vector<Edge> e;
  e.push_back({"", "", 0, [&p](const RowPlace& r) { return spec_last_at(p, r, r.t); }});
  for (int k = -8; k <= 8; ++k)
    if (k != 0)
      e.push_back({"last_key_" + std::to_string(std::abs(k)) + (k > 0 ? "_later" : "_earlier"),
                   "its last key is " + std::to_string(std::abs(k)) + (k > 0 ? " after" : " before") + " the window's last (" +
                       (p.band.right > 0 ? "window_right read as " + std::to_string(p.band.right + k)
                                         : std::string(k > 0 ? "later keys seen" : "its own key and the newest ones dropped")) + ")",
                   1 + (std::abs(k) > 1), [&p, k](const RowPlace& r) { return std::min(r.last_key, spec_last_at(p, r, r.t) + k); }});
  if (p.band.left >= 0)
    e.push_back({"last_key_window_length_kept",
                 "a row near the sequence's start keeps window_left + 1 keys: its first key clamped at 0, its last moved "
                 "later by as much (future keys)",
                 1, [&p](const RowPlace& r) { return std::min(r.last_key, std::max(spec_last_at(p, r, r.t), spec_first_at(p, r.t) + p.band.left)); }});
  e.push_back({"last_key_call_end",
               p.mode == RunMode::prefill ? "it sees every later key of its sequence: no causal bound"
                                          : "it sees every key of its call, later rows included: no causal bound inside a call",
               1, [](const RowPlace& r) { return r.last_key; }});
  if (p.band.right < 0)  // -1 means no right edge; read as an edge of -1 keys, the row's own key is hidden
    e.push_back({"last_key_before_its_own_window_right_minus_1_read_as_an_edge",
                 "window_right -1 (no right edge) read as a right edge: its last key is the one before its own", 2,
                 [](const RowPlace& r) { return r.t - 1; }});
  if (p.mode != RunMode::prefill) {
    e.push_back({"last_key_from_its_index_in_its_call",
                 "its last key is the window end of the position its index in its call gives (the call's first row taken "
                 "as position 0)", 2,
                 [&p](const RowPlace& r) { return spec_last_at(p, r, r.t - r.c0); }});
    e.push_back({"last_key_from_its_index_in_its_call_within_own",
                 "its last key is no later than the window end of the position its index in its call gives, its own window "
                 "kept inside it (a mask row picked by the index, its keys gathered by position)", 2,
                 [&p](const RowPlace& r) { return std::min(spec_last_at(p, r, r.t), spec_last_at(p, r, r.t - r.c0)); }});
  }
  for (const Anchor& a : anchors(tiles))
    e.push_back({"last_key_from_" + a.name, "its last key is the window end of " + a.words + ", not its own", 2,
                 [&p, at = a.at](const RowPlace& r) { return spec_last_at(p, r, at(r)); }});
  for (int T : tiles) {
    e.push_back({"last_key_tile_dropped_" + std::to_string(T),
                 "its last key is rounded down to the end of a whole tile of " + std::to_string(T) + " (a partial last key tile dropped)", 2,
                 [&p, T](const RowPlace& r) { return floor_to(spec_last_at(p, r, r.t) + 1, T) - 1; }});
    e.push_back({"last_key_tile_dropped_" + std::to_string(T) + "_of_packed_batch",
                 "its last key is rounded down to the end of a whole " + std::to_string(T) + "-key tile of the packed batch's rows "
                 "(tiles on the batch's buffer: a partial last tile dropped)", 3,
                 [&p, T](const RowPlace& r) { return floor_to(spec_last_at(p, r, r.t) + 1 + r.packed, T) - 1 - r.packed; }});
    e.push_back({"last_key_tile_kept_whole_" + std::to_string(T) + "_of_packed_batch",
                 "its last " + std::to_string(T) + "-key tile of the packed batch's rows is attended whole (keys after the window's end seen)", 3,
                 [&p, T](const RowPlace& r) { return std::min(r.last_key, ceil_to(spec_last_at(p, r, r.t) + 1 + r.packed, T) - 1 - r.packed); }});
    e.push_back({"newest_key_tile_dropped_" + std::to_string(T),
                 "the " + std::to_string(T) + "-key tile holding its last key is dropped whole, full or not (tiles on " + tile_words(p, T) + ")", 2,
                 [&p, T](const RowPlace& r) { return floor_to(spec_last_at(p, r, r.t), T) - 1; }});
    e.push_back({"last_key_tile_kept_whole_" + std::to_string(T),
                 "its last key tile of " + std::to_string(T) + " is attended whole (keys after the window's end seen)", 2,
                 [&p, T](const RowPlace& r) { return std::min(r.last_key, ceil_to(spec_last_at(p, r, r.t) + 1, T) - 1); }});
  }
  return e;
}


// A kernel that computes a window edge once per query tile and walks whole key tiles: the edge of
// the tile's first or last row, rounded to a key tile; then either the bound alone, or the bound
// within the row's own edge (its per-element mask kept: the rule only takes keys away).
void add_tiled_anchor_rules(const AttnParams& p, const std::vector<int>& tiles, std::vector<Edge>& first,
                            std::vector<Edge>& last) {
  for (int Q : tiles)
    for (const bool last_row : {false, true}) {
      const std::string row_name = std::string(last_row ? "last" : "first") + "_row_" + std::to_string(Q);
      const std::string row_words = std::string("the ") + (last_row ? "last" : "first") + " row of its " + std::to_string(Q) + "-row query tile";
      auto anchor = [Q, last_row](const RowPlace& r) {
        const std::int64_t start = std::max(r.c0, floor_to(r.t, Q));
        return last_row ? std::min(r.c1, floor_to(r.t, Q) + Q - 1) : start;
      };
      for (const bool masked : {false, true}) {
        const std::string m = masked ? "_within_own" : "";
        const std::string mw = masked ? ", the row's own window edge kept inside it" : "";
        if (masked) {
          first.push_back({"first_key_from_query_tile_" + row_name + m, "its first key is no earlier than the window start of " + row_words + mw, 2,
                           [&p, anchor](const RowPlace& r) { return std::max(spec_first_at(p, r.t), spec_first_at(p, anchor(r))); }});
          last.push_back({"last_key_from_query_tile_" + row_name + m, "its last key is no later than the window end of " + row_words + mw, 2,
                          [&p, anchor](const RowPlace& r) { return std::min(spec_last_at(p, r, r.t), spec_last_at(p, r, anchor(r))); }});
        }
        for (int K : tiles) {
          const std::string kt = "_key_tile_" + std::to_string(K);
          first.push_back({"first_key_tile_of_query_tile_" + row_name + kt + m,
                           "its first key is the start of the " + std::to_string(K) + "-key tile holding the window start of " + row_words + mw, 3,
                           [&p, anchor, K, masked](const RowPlace& r) {
                             const std::int64_t x = floor_to(spec_first_at(p, anchor(r)), K);
                             return masked ? std::max(x, spec_first_at(p, r.t)) : x;
                           }});
          last.push_back({"last_key_tile_of_query_tile_" + row_name + kt + m,
                          "its last key is the end of the " + std::to_string(K) + "-key tile holding the window end of " + row_words + mw, 3,
                          [&p, anchor, K, masked](const RowPlace& r) {
                            const std::int64_t x = std::min(r.last_key, ceil_to(spec_last_at(p, r, anchor(r)) + 1, K) - 1);
                            return masked ? std::min(x, spec_last_at(p, r, r.t)) : x;
                          }});
        }
      }
    }
}

std::vector<Condition> row_conditions(const AttnParams& p, const std::vector<int>& tiles) {
  std::vector<Condition> c;
  auto tiles_spanned = [](const RowPlace& r, int T) { return floor_to(r.spec_last, T) / T - floor_to(r.spec_first, T) / T + 1; };
  for (int T : tiles) {
    const std::string n = std::to_string(T);
    c.push_back({"row_ends_a_" + n + "_tile", "whose position ends a " + n + "-key tile ((t + 1) % " + n + " == 0: its last tile is full)", 1,
                 [T](const RowPlace& r) { return (r.t + 1) % T == 0; }});
    c.push_back({"row_starts_a_" + n + "_tile", "whose position starts a " + n + "-key tile (t % " + n + " == 0: its last tile holds one key)", 1,
                 [T](const RowPlace& r) { return r.t % T == 0; }});
    c.push_back({"odd_" + n + "_tiles", "whose keys span an odd number of " + n + "-key tiles", 1,
                 [T, tiles_spanned](const RowPlace& r) { return r.spec_first <= r.spec_last && tiles_spanned(r, T) % 2 == 1; }});
    c.push_back({"even_" + n + "_tiles", "whose keys span an even number of " + n + "-key tiles", 1,
                 [T, tiles_spanned](const RowPlace& r) { return r.spec_first <= r.spec_last && tiles_spanned(r, T) % 2 == 0; }});
    c.push_back({"several_" + n + "_tiles", "whose keys span more than one " + n + "-key tile", 1,
                 [T, tiles_spanned](const RowPlace& r) { return r.spec_first <= r.spec_last && tiles_spanned(r, T) > 1; }});
    c.push_back({"window_starts_inside_a_" + n + "_tile", "whose first key is not on a multiple of " + n, 1,
                 [T](const RowPlace& r) { return r.spec_first % T != 0; }});
  }
  if (p.band.left >= 0)
    c.push_back({"window_clipped_at_0", "whose window reaches past the sequence's first key (t < window_left)", 1,
                 [&p](const RowPlace& r) { return r.t < p.band.left; }});
  if (p.mode != RunMode::prefill) {
    c.push_back({"call_first_row", "that are their call's first row", 1, [](const RowPlace& r) { return r.t == r.c0; }});
    c.push_back({"not_call_first_row", "that are not their call's first row", 1, [](const RowPlace& r) { return r.t != r.c0; }});
    c.push_back({"call_last_row", "that are their call's last row", 1, [](const RowPlace& r) { return r.t == r.c1; }});
  }
  return c;
}

// The class a rule has when it is one the rest of bisect names too (the band's, the recovery's).
std::string known_class(const AttnParams& p, const Edge& first, const Edge& last) {
  const bool causal = p.band.right == 0;
  if (first.name.empty() && causal && last.name == "last_key_1_earlier") return "own_key_dropped";
  if (first.name.empty() && causal && last.name.rfind("last_key_", 0) == 0 &&
      (last.name.find("_later") != std::string::npos || last.name == "last_key_call_end" || last.name == "last_key_window_length_kept"))
    return "future_keys";
  if (last.name.empty() && first.name == "first_key_1_earlier") return "window_plus_one";
  if (last.name.empty() && first.name == "first_key_1_later") return "window_minus_one";
  if (last.name.empty() && first.name == "first_key_unbounded") return "no_window";
  if (last.name.empty() && first.name == "first_key_at_least_call_start") return "chunk_prefix_dropped";
  return {};
}

std::string rule_name(const Edge& first, const Edge& last) {
  if (first.name == last.name) return first.name;  // one rule deciding both edges (a block plan)
  const std::string a = "first_key_from_", b = "last_key_from_";
  if (first.name.rfind(a, 0) == 0 && last.name.rfind(b, 0) == 0 && first.name.substr(a.size()) == last.name.substr(b.size()))
    return "window_from_" + first.name.substr(a.size());
  if (first.name.empty()) return last.name;
  if (last.name.empty()) return first.name;
  return first.name + "_and_" + last.name;
}

std::string rule_words(const Edge& first, const Edge& last) {
  if (first.words == last.words) return first.words;
  if (first.name.empty()) return last.words;
  if (last.name.empty()) return first.words;
  return first.words + "; and " + last.words;
}

std::vector<int> tiles_for(const AttnParams& p, const KeyRunTiles& extra) {
  std::set<int> t = {8, 16, 32, 48, 64, 96, 128, 256};
  if (p.cache == CachePolicy::paged && p.page_size > 1) t.insert(p.page_size);
  if (p.mask_format == MaskFormat::swa_compress && p.mask_block > 1) t.insert(p.mask_block);
  for (int x : extra.extra)
    if (x > 1 && x <= 4096) t.insert(x);
  // A tile longer than every sequence cannot be told from the case: a rule on it is another rule's
  // degenerate form (a last tile that never fills drops every key).
  std::int64_t longest = 1;
  for (int b = 0; b < p.batch; ++b) longest = std::max<std::int64_t>(longest, p.seq_lens[b]);
  std::vector<int> kept;
  for (int x : t)
    if (x <= longest) kept.push_back(x);
  return kept;
}

}  // namespace swa::harness::key_run_rules
