// The window's edge rules as readings (readings_edges.hpp).
#include "readings_edges.hpp"

#include <string>

namespace swa::harness {
namespace {

using golden::Reading;

// The class of an edge rule: the familiar ones by their old names, the rest by where the edge comes from.
std::string edge_class(const golden::EdgeRule& e, bool upper) {
  using golden::EdgeAnchor;
  using golden::EdgeRounding;
  const bool exact = e.rounding == EdgeRounding::exact;
  const bool tile_anchor = e.anchor == EdgeAnchor::query_tile_first_row || e.anchor == EdgeAnchor::query_tile_last_row;
  if (!upper) {
    if (e.anchor == EdgeAnchor::row) return "window_edge_per_key_tile";
    if (e.anchor == EdgeAnchor::call_first_row && exact && !e.masked) return "window_edge_from_call_start";
    return tile_anchor ? "window_edge_per_query_tile" : "window_edge_per_call";
  }
  if (e.anchor == EdgeAnchor::row)
    return e.rounding == EdgeRounding::up_to_key_tile ? "future_keys_in_key_tile" : "diagonal_key_tile_dropped";
  if (e.anchor == EdgeAnchor::query_tile_last_row && exact && !e.masked) return "future_keys_in_query_tile";
  if (e.anchor == EdgeAnchor::call_last_row && exact && !e.masked) return "future_keys_in_call";
  return tile_anchor ? "upper_edge_per_query_tile" : "upper_edge_per_call";
}

// "takes the window's lower edge from the first row of its aligned 32-row query tile, rounded up to an
// aligned 32-key tile, inside its own edge (its per-row mask kept)".
std::string edge_words(const golden::EdgeRule& e, bool upper) {
  using golden::EdgeAnchor;
  using golden::EdgeRounding;
  const bool call_grid = e.grid == golden::TileGrid::call;
  const std::string query_tile = (call_grid ? "" : "aligned ") + std::to_string(e.query_tile) + "-row query tile" +
                                 (call_grid ? " of its call (tiles counted from the call's first row)" : "");
  std::string w = std::string("takes the window's ") + (upper ? "upper (last visible) edge" : "lower edge") + " from ";
  switch (e.anchor) {
    case EdgeAnchor::row: w += "its own row"; break;
    case EdgeAnchor::query_tile_first_row: w += "the first row of its " + query_tile; break;
    case EdgeAnchor::query_tile_last_row: w += "the last row of its " + query_tile; break;
    case EdgeAnchor::call_first_row: w += "its call's first row"; break;
    case EdgeAnchor::call_last_row: w += "its call's last row"; break;
  }
  const std::string tile = (call_grid ? "" : "aligned ") + std::to_string(e.key_tile) + "-key tile" +
                           (call_grid ? " of the call's keys (tiles counted from its first visible key)" : "");
  const std::string a = call_grid ? "a " : "an ";
  if (e.rounding == EdgeRounding::down_to_key_tile)
    w += upper ? ", and drops the " + tile + " that holds it unless it ends there" : ", rounded down to " + a + tile + " (the tile kept whole)";
  else if (e.rounding == EdgeRounding::up_to_key_tile)
    w += upper ? ", and keeps the " + tile + " that holds it whole" : ", rounded up to " + a + tile + " (a partly visible tile dropped)";
  w += e.masked ? ", inside its own edge (its per-row mask kept)" : (e.anchor == EdgeAnchor::row ? "" : ", for every row alike (no per-row mask)");
  return w;
}

}  // namespace

// Every edge rule that can change what a row sees (golden/readings.hpp, EdgeRule), lower and upper.
// A rule whose bound can only widen a masked row, or only repeat the unmasked one, is left out.
std::vector<ReadingSetting> edge_settings(const AttnParams& p) {
  using golden::EdgeAnchor;
  using golden::EdgeRounding;
  using golden::EdgeRule;
  std::vector<ReadingSetting> s;
  golden::TileGrid grid = golden::TileGrid::absolute;
  auto add = [&](EdgeRule e, bool upper) {
    e.grid = grid;
    // A rule with no tile has no grid to be on: the absolute grid's copy of it is the one.
    if (grid == golden::TileGrid::call && e.query_tile == 0 && e.key_tile == 0) return;
    const auto change = [e, upper](Reading& r) { (upper ? r.upper_edge : r.lower_edge) = e; };
    s.push_back(reading_setting(edge_class(e, upper), edge_words(e, upper), change));
  };
  struct Anchor {
    EdgeAnchor anchor;
    int query_tile;
    bool first;  // the anchor's edge is at or before the row's (a first row), else at or after (a last row)
  };
  std::vector<Anchor> anchors;  // the calls' (fewer parameters) before the query tiles'
  if (p.mode != RunMode::prefill) {  // in prefill a call is the whole sequence: its edge rows are no one's
    anchors.push_back({EdgeAnchor::call_first_row, 0, true});
    anchors.push_back({EdgeAnchor::call_last_row, 0, false});
  }
  for (int t : kEdgeTiles) {
    anchors.push_back({EdgeAnchor::query_tile_first_row, t, true});
    anchors.push_back({EdgeAnchor::query_tile_last_row, t, false});
  }
  // A chunk or decode schedule is tried on the call's own tile grids too (in prefill they are the same).
  std::vector<golden::TileGrid> grids = {golden::TileGrid::absolute};
  if (p.mode != RunMode::prefill) grids.push_back(golden::TileGrid::call);
  for (const golden::TileGrid g : grids)
  for (const bool upper : {false, true}) {
    grid = g;
    if (!upper && p.band.left < 0) continue;  // no lower edge to move
    // The row's own edge in whole key tiles: lower rounded down (unmasked) or up; upper dropped or kept whole.
    for (int k : kEdgeTiles) {
      add({EdgeAnchor::row, 0, EdgeRounding::down_to_key_tile, k, upper}, upper);
      add({EdgeAnchor::row, 0, EdgeRounding::up_to_key_tile, k, false}, upper);
    }
    for (const Anchor& a : anchors) {
      // The anchor's bound widens the row's edge when it lies before a lower edge (a first row) or after
      // an upper one (a last row): masked, such a bound changes nothing, unless rounding pulls it back.
      const bool widens = upper ? !a.first : a.first;
      add({a.anchor, a.query_tile, EdgeRounding::exact, 0, false}, upper);
      for (int k : kEdgeTiles)
        for (const EdgeRounding rounding : {EdgeRounding::down_to_key_tile, EdgeRounding::up_to_key_tile}) {
          add({a.anchor, a.query_tile, rounding, k, false}, upper);
          // Masked matters where the rounded bound can land on the row's side of its own edge.
          const bool narrows = widens ? (upper ? rounding == EdgeRounding::down_to_key_tile : rounding == EdgeRounding::up_to_key_tile)
                                      : (upper ? rounding == EdgeRounding::up_to_key_tile : rounding == EdgeRounding::down_to_key_tile);
          if (narrows) add({a.anchor, a.query_tile, rounding, k, true}, upper);
        }
    }
  }
  return s;
}

}  // namespace swa::harness
