#pragma once
// The edge rules bisect fits to measured key runs (key_runs.cpp): where a row sits in its sequence
// and its call, and the first and last key a kernel can give it as functions of that: an offset, the
// edge of another row (its query tile's first or last row, its call's), an edge rounded to a tile,
// the tile of another row's edge with or without the row's own kept, the call's keys all seen. Each
// rule has a class name and the words a finding uses.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "key_runs.hpp"
#include "swa/params.hpp"

namespace swa::harness::key_run_rules {

// Where a row sits: its sequence, position and head, its call's first and last row, and the spec's
// edges (the first and last key it sees).
struct RowPlace {
  int b = 0, h = 0;
  std::int64_t t = 0, n = 0, c0 = 0, c1 = 0;
  bool decode = false, chunked = false;
  std::int64_t last_key = 0;  // the last key that exists for the row's call
  std::int64_t packed = 0;    // the sequence's first row in the packed batch (a varlen kernel's key grid)
  std::int64_t spec_first = 0, spec_last = 0;
};

// One edge rule: the edge of a row as a function of where it sits.
struct Edge {
  std::string name, words;
  int complexity = 0;
  std::function<std::int64_t(const RowPlace&)> at;
};

std::int64_t floor_to(std::int64_t x, std::int64_t t);
std::int64_t ceil_to(std::int64_t x, std::int64_t t);
RowPlace place(const AttnParams& p, int b, std::int64_t t, int h);
// The spec's first and last visible key of a row at position x (of r's call).
std::int64_t spec_first_at(const AttnParams& p, std::int64_t x);
std::int64_t spec_last_at(const AttnParams& p, const RowPlace& r, std::int64_t x);

// The tiles the rules use: the common ones, the page size, the mask block, the DUT's stated tiles.
std::vector<int> tiles_for(const AttnParams& p, const KeyRunTiles& extra);
// Each list starts with the spec's edge (an empty name); rules capture p by reference.
std::vector<Edge> first_key_rules(const AttnParams& p, const std::vector<int>& tiles);
std::vector<Edge> last_key_rules(const AttnParams& p, const std::vector<int>& tiles);
void add_tiled_anchor_rules(const AttnParams& p, const std::vector<int>& tiles, std::vector<Edge>& first,
                            std::vector<Edge>& last);

// A condition on where a row sits: a rule that holds on the rows it picks, the spec on the others,
// is a rule of the kernel's too (a last page handled as empty when it is full, an unpaired split).
struct Condition {
  std::string name, words;  // words: "rows <words>"
  int complexity = 1;
  std::function<bool(const RowPlace&)> holds;  // of a row with its spec_first / spec_last set
};
std::vector<Condition> row_conditions(const AttnParams& p, const std::vector<int>& tiles);

// A pair's class (the class another method names for it, when there is one), and its words.
std::string known_class(const AttnParams& p, const Edge& first, const Edge& last);
std::string rule_name(const Edge& first, const Edge& last);
std::string rule_words(const Edge& first, const Edge& last);

}  // namespace swa::harness::key_run_rules
