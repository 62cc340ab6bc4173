#include "cache_finding.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "fp8_codes.hpp"
#include "ring_slot_fit.hpp"
#include "swa/dut/kv_cache.hpp"
#include "swa/paging.hpp"

namespace swa::harness {
namespace {

using Kind = CacheMismatch::Kind;
using Held = CacheMismatch::Held;

// What a differing slot shows.
enum class SlotClass { unwritten, misplaced, written_outside, other_sequence, values_differ };

// ring_slots: the slots of a ring cache (0 for linear and paged).
SlotClass slot_class(const CacheMismatch& m, std::int64_t ring_slots) {
  if (m.expected < 0) return m.held_kind == Held::zeros ? SlotClass::values_differ : SlotClass::written_outside;
  if (m.held_kind == Held::zeros) return SlotClass::unwritten;
  if (m.held_kind == Held::no_position) return SlotClass::values_differ;
  if (m.held_sequence != m.sequence) return SlotClass::other_sequence;
  // A ring slot still holding the position a full ring earlier: the write never came.
  if (ring_slots > 0 && m.held < m.expected && (m.expected - m.held) % ring_slots == 0) return SlotClass::unwritten;
  return SlotClass::misplaced;
}

std::string where(const CacheMismatch& m, const AttnParams& p) {
  std::ostringstream o;
  o << "after " << m.call << (m.last_call ? " (the schedule's last call)" : "") << ", sequence " << m.sequence;
  if (p.cache == CachePolicy::paged)
    o << " position " << m.slot << " (physical page " << m.page << ", offset " << m.slot % std::max(1, p.page_size) << ")";
  else
    o << " slot " << m.slot;
  return o.str();
}

std::string held_words(const CacheMismatch& m) {
  switch (m.held_kind) {
    case Held::zeros: return "nothing (zeros)";
    case Held::no_position: return "K/V that match no input row's stored form";
    case Held::position:
      return "position " + std::to_string(m.held) +
             (m.held_sequence != m.sequence ? " of sequence " + std::to_string(m.held_sequence) : std::string());
  }
  return "";
}

std::string expected_words(const CacheMismatch& m) {
  return m.expected >= 0 ? "position " + std::to_string(m.expected) : "nothing (an unwritten slot stays zero)";
}

// Which prompt chunk writes position `pos` of sequence b, and whether it is the sequence's last.
std::string chunk_of(const AttnParams& p, int b, std::int64_t pos) {
  const std::int64_t prompt = prompt_len(p, b);
  if (pos >= prompt) return "decode step " + std::to_string(pos - prompt);
  const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
  const std::int64_t c = pos / chunk, last = (prompt - 1) / chunk;
  return "chunk " + std::to_string(c) + (c == last ? " (its prompt's last)" : "") + (c == 0 ? " (its first)" : "");
}

std::string range_words(const std::set<std::int64_t>& positions) {
  std::vector<std::string> parts;
  for (auto it = positions.begin(); it != positions.end();) {
    std::int64_t a = *it, b = a;
    while (++it != positions.end() && *it == b + 1) b = *it;
    parts.push_back(a == b ? std::to_string(a) : std::to_string(a) + ".." + std::to_string(b));
    if (parts.size() == 6 && it != positions.end()) {
      parts.push_back("...");
      break;
    }
  }
  std::string o;
  for (std::size_t i = 0; i < parts.size(); ++i) o += (i ? ", " : "") + parts[i];
  return o;
}

Finding say(std::string name, std::vector<std::string> evidence, Confidence c, std::string why) {
  return Finding{std::move(name), FindingSource::cache_check, std::move(evidence), c, std::move(why)};
}

// Slots whose kv heads hold another kv head's K/V of the right row, or zeros: one map of heads shared
// by (nearly) every such slot is a head index the DUT's cache write gets wrong.
std::optional<Finding> kv_heads_finding(const std::vector<const CacheMismatch*>& slots, const AttnParams& p) {
  std::map<std::vector<int>, int> maps;
  int told = 0;
  for (const CacheMismatch* m : slots)
    if (p.heads_kv > 0 && static_cast<int>(m->head_holds.size()) == p.heads_kv &&
        std::none_of(m->head_holds.begin(), m->head_holds.end(), [](int h) { return h == CacheMismatch::kHeadOther; })) {
      bool identity = true;  // every head its own: nothing misplaced (FP8 codes off by the other rounding)
      for (int g = 0; g < p.heads_kv; ++g) identity = identity && m->head_holds[g] == g;
      if (!identity) ++told, ++maps[m->head_holds];
    }
  if (told == 0 || told * 10 < static_cast<int>(slots.size()) * 9) return std::nullopt;
  const auto& [map, count] = *std::max_element(maps.begin(), maps.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::ostringstream o, share;
  o << "in " << count << " of the " << slots.size() << " slots that hold bytes of no row, the right position's row is there "
    << "with its kv heads placed otherwise:";
  for (int g = 0; g < p.heads_kv; ++g)
    if (map[g] != g)
      o << " kv head " << g << " holds " << (map[g] == CacheMismatch::kHeadZeros ? "zeros (never written)" : "kv head " + std::to_string(map[g]) + "'s K/V") << ";";
  o << " the DUT's cache write indexes the kv head wrong (its head offset or stride)";
  share << count << " of the " << slots.size() << " differing slots recorded show one map of kv heads";
  // One slot is one row: a map of heads told by one slot alone is at most medium.
  const bool clear = count >= 2 && count * 10 >= static_cast<int>(slots.size()) * 9;
  if (count < 2) share << "; one slot alone: at most medium";
  Finding f = say("kv_heads_misplaced_in_cache", {o.str()}, clear ? Confidence::high : Confidence::medium, share.str());
  f.reproduced = count == static_cast<int>(slots.size());  // every differing slot is that map of the right row, byte for byte
  return f;
}

// Paged: slots that hold rows the spec never stores (rows in pages already dead to the call's next
// reader, whose page-table entry is -1): the DUT wrote a row whose page is not held, somewhere.
std::optional<Finding> unheld_rows_written(const std::vector<const CacheMismatch*>& slots, const AttnParams& p) {
  if (p.cache != CachePolicy::paged || p.page_size <= 0 || slots.empty()) return std::nullopt;
  std::set<std::int64_t> pages;
  std::set<std::pair<int, std::int64_t>> rows;
  for (const CacheMismatch* m : slots) {
    if (m->held_kind != Held::position || m->held_sequence < 0 || m->held_sequence >= p.batch) return std::nullopt;
    bool unstored = false;
    for_each_cache_write(p, m->held_sequence, [&](std::int64_t s, std::int64_t e, std::int64_t next) {
      if (m->held >= s && m->held < e) unstored = m->held < first_stored_row(p.band, s, next, p.page_size);
    });
    if (!unstored) return std::nullopt;
    pages.insert(m->page);
    rows.insert({m->held_sequence, m->held});
  }
  std::ostringstream o;
  o << "each of the " << slots.size() << " differing slots recorded holds a row the spec never stores (";
  std::map<int, std::set<std::int64_t>> by_sequence;
  for (const auto& [b, pos] : rows) by_sequence[b].insert(pos);
  bool first = true;
  for (const auto& [b, pos] : by_sequence) o << (first ? "" : "; ") << "sequence " << b << ": positions " << range_words(pos), first = false;
  o << "): rows in pages dead to the call's next query, whose page-table entry is -1 (no page held), were written anyway";
  const bool last_page = pages.size() == 1 && *pages.begin() == p.pool_pages - 1;
  if (last_page)
    o << ", into physical page " << p.pool_pages - 1 << ", the pool's last: the entry -1 used as a page index (counted from the "
      << "pool's end, or wrapped), over whichever sequence holds that page";
  else
    o << ", into physical page(s) " << range_words(pages);
  std::ostringstream share;
  share << slots.size() << " of the " << slots.size() << " differing slots recorded hold rows of unheld pages";
  return say("unheld_page_rows_written", {o.str()}, Confidence::high, share.str());
}

// The slots whose kv heads hold whole heads of other rows (head_rows): the values stored right, in
// another dimension order. The order kernels port from other stacks (heads outer, FlashInfer's HND:
// [kv_heads, slots, head_size] per sequence, or per page) is computed for each recorded head and
// compared; when every one agrees it is the finding, reproduced on those heads.
std::optional<Finding> kv_layout_finding(const std::vector<const CacheMismatch*>& slots, const AttnParams& p) {
  const bool paged = p.cache == CachePolicy::paged;
  const std::int64_t per_region = paged ? p.page_size : dut::kv_cache_layout(p).slots;  // slots of one [., H, D] block
  // The model's position of every slot of a sequence after a call (recorded on its first differing slot).
  std::map<std::pair<int, std::string>, const std::vector<std::int64_t>*> model;
  for (const CacheMismatch* m : slots)
    if (!m->model_positions.empty()) model.emplace(std::pair(m->sequence, m->call), &m->model_positions);
  std::int64_t heads = 0, found = 0, predicted = 0, predictable = 0;
  std::string example;
  for (const CacheMismatch* m : slots) {
    if (m->head_rows.empty()) continue;
    const auto positions = model.find(std::pair(m->sequence, m->call));
    for (int h = 0; h < static_cast<int>(m->head_rows.size()); ++h) {
      const CacheMismatch::HeadRow& got = m->head_rows[h];
      ++heads;
      const bool zeros = got.head == CacheMismatch::kHeadZeros;
      if (got.position < 0 && !zeros) continue;
      ++found;
      if (example.empty() && !zeros && (got.sequence != m->sequence || got.position != m->expected || got.head != h))
        example = where(*m, p) + " kv head " + std::to_string(h) + " holds position " + std::to_string(got.position) +
                  (got.sequence != m->sequence ? " of sequence " + std::to_string(got.sequence) : "") + "'s kv head " +
                  std::to_string(got.head);
      // Heads outer: the DUT's (head g, slot s') lands where the spec's (slot s, head h) is read, g * S + s' = s * H + h.
      const std::int64_t slot_in_region = paged ? m->slot % p.page_size : m->slot;
      const std::int64_t f = slot_in_region * p.heads_kv + h, g = f / per_region, s2 = f % per_region;
      std::optional<std::int64_t> want;  // -1: the slot that order puts there is empty
      if (paged) want = m->slot - slot_in_region + s2;
      else if (positions != model.end() && s2 < static_cast<std::int64_t>(positions->second->size()))
        want = (*positions->second)[s2];
      if (!want) continue;
      ++predictable;
      predicted += *want < 0 ? zeros : got.sequence == m->sequence && got.position == *want && got.head == g;
    }
  }
  if (heads == 0 || found * 10 < heads * 9) return std::nullopt;
  const std::string order = paged ? "[kv_heads, page_size, head_size] per page" : "[kv_heads, slots, head_size] per sequence";
  const std::string spec = paged ? "[page_size, kv_heads, head_size]" : "[slots, kv_heads, head_size]";
  std::ostringstream share;
  share << found << " of the " << heads << " kv heads recorded at differing slots hold another row's or head's K/V whole";
  if (predictable > 0 && predicted == predictable && predictable == heads) {
    share << "; every one is the head the order " << order << " puts there";
    Finding f = say("kv_cache_heads_outer",
                    {"the DUT writes and reads its KV cache as " + order + " (heads outer, FlashInfer's HND order) where "
                     "dut_v2.h's is " + spec + ": each slot's kv heads hold the heads the other order puts "
                     "there (" + example + ")",
                     "reproduced: " + std::to_string(predicted) + " of the " + std::to_string(heads) +
                         " kv heads recorded are the heads that order puts at their place"},
                    Confidence::high, share.str());
    f.reproduced = true;
    return f;
  }
  if (predictable > 0) share << "; " << predicted << " of " << predictable << " are the heads " << order << " puts there";
  return say("kv_cache_layout_differs",
             {"the slots hold the right values in another dimension order: each kv head's head_size values are a whole "
              "head of another row (" + example + "), where dut_v2.h's order is " + spec + ": the DUT's cache index "
              "(its strides or its order of slots and heads) differs"},
             Confidence::medium, share.str());
}

}  // namespace

Finding cache_finding(const std::vector<CacheMismatch>& all, const AttnParams& p) {
  if (all.empty())
    return say("not_told", {"the cache check recorded no difference to classify"}, Confidence::abstained,
               "no cache difference was recorded");
  std::map<Kind, std::vector<const CacheMismatch*>> by_kind;
  for (const CacheMismatch& m : all) by_kind[m.kind].push_back(&m);
  const std::string first_words = [&] {
    const auto slot = std::find_if(all.begin(), all.end(), [](const CacheMismatch& x) { return x.kind == Kind::slot; });
    const CacheMismatch& m = slot != all.end() ? *slot : all.front();
    if (m.kind == Kind::slot) return where(m, p) + " holds " + held_words(m) + ", expected " + expected_words(m);
    return "first difference after " + m.call + (m.last_call ? " (the schedule's last call)" : "");
  }();
  if (by_kind.count(Kind::geometry))
    return say("cache_geometry_wrong",
               {"the cache the DUT reported has another shape than the golden's (slots, pages, sequences) or none at all"},
               Confidence::high, "the cache's geometry differs: nothing else can be compared");

  // The compact ring's base explains slots shifted by it.
  if (const auto it = by_kind.find(Kind::base); it != by_kind.end()) {
    const CacheMismatch& m = *it->second.front();
    std::ostringstream o;
    o << "after " << m.call << ", sequence " << m.sequence << "'s compact ring base is " << m.got_value << ", expected "
      << m.expected_value << " (max(0, k - W) for a first write of k tokens, dut_v2.h)";
    std::vector<std::string> evidence = {o.str()};
    if (by_kind.count(Kind::slot))
      evidence.push_back("the slots follow the DUT's base: the first, " + first_words);
    return say("compact_base_wrong", evidence, Confidence::high, "the base the DUT set differs from the rule's");
  }
  if (const auto it = by_kind.find(Kind::page_table); it != by_kind.end()) {
    const CacheMismatch& m = *it->second.front();
    std::ostringstream o;
    o << "after " << m.call << ", sequence " << m.sequence << "'s page table maps logical page " << m.page << " to "
      << m.got_value << ", expected " << m.expected_value << " (" << it->second.size()
      << " entries differ): the harness owns the page table; a DUT reads it and leaves it as it is";
    return say("page_table_changed", {o.str()}, Confidence::high, "the page table differs from the one the harness gave");
  }

  if (std::optional<Finding> fitted = fit_ring_slot_rule(all, p)) {
    fitted->evidence.push_back("the first: " + first_words);
    return *fitted;
  }
  if (const auto it = by_kind.find(Kind::slot); it != by_kind.end()) {
    const auto& slots = it->second;
    std::map<SlotClass, std::vector<const CacheMismatch*>> by_class;
    const bool ring = p.cache == CachePolicy::ring_modulo || p.cache == CachePolicy::ring_compact;
    for (const CacheMismatch* m : slots) by_class[slot_class(*m, ring ? p.band.left + 1 : 0)].push_back(m);
    const auto& [top, members] = *std::max_element(by_class.begin(), by_class.end(),
                                                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    const bool clear = members.size() * 10 >= slots.size() * 9;
    std::ostringstream share;
    share << members.size() << " of the " << slots.size() << " differing slots recorded are alike";
    const Confidence c = clear ? Confidence::high : Confidence::medium;
    const std::string why = clear ? share.str() : share.str() + "; the others differ in other ways";
    // Another sequence's rows, or rows where none belong: rows of unheld pages written anyway, when they all are.
    if (top == SlotClass::other_sequence || top == SlotClass::written_outside)
      if (std::optional<Finding> unheld = unheld_rows_written(members, p)) {
        unheld->evidence.push_back("the first: " + first_words);
        return *unheld;
      }
    switch (top) {
      case SlotClass::unwritten: {
        std::map<int, std::set<std::int64_t>> positions;
        std::set<std::string> writers;
        for (const CacheMismatch* x : members) {
          positions[x->sequence].insert(x->expected);
          writers.insert(chunk_of(p, x->sequence, x->expected));
        }
        std::vector<std::string> per;
        for (const auto& [b, pos] : positions) per.push_back("sequence " + std::to_string(b) + ": positions " + range_words(pos));
        std::string w;
        for (const std::string& x : writers) w += (w.empty() ? "" : "; ") + x;
        return say("rows_not_written",
                   {"the DUT never wrote rows the golden's cache holds (their slots hold zeros, or in a ring the position "
                    "a full ring earlier): " + first_words,
                    "unwritten: " + [&] { std::string o; for (auto& x : per) o += (o.empty() ? "" : "; ") + x; return o; }() +
                        "; the calls that should have written them: " + w,
                    "tokens_written " + std::string(by_kind.count(Kind::tokens_written) ? "differs too" : "is right")},
                   c, why);
      }
      case SlotClass::misplaced: {
        std::set<std::int64_t> offsets;
        for (const CacheMismatch* x : members) offsets.insert(x->held - x->expected);
        std::ostringstream o;
        o << "each differing slot holds another position of the same sequence than the golden's rule puts there; held "
             "minus expected: "
          << range_words(offsets)
          << (offsets.size() == 1 ? " in every one: the DUT's slot formula is the rule's shifted by that many positions"
                                  : ": the DUT's slot formula differs from the rule (dut_v2.h, \"The KV cache\")");
        return say("wrong_slot", {first_words, o.str()}, c, why);
      }
      case SlotClass::written_outside: {
        std::set<std::int64_t> held;
        for (const CacheMismatch* x : members) held.insert(x->held);
        return say("rows_written_outside",
                   {first_words, "slots that must stay zero (past tokens_written, or below the ring's base) hold rows "
                                 "(positions " + range_words(held) + "): a write past the call's rows, or a prefetch "
                                 "that writes the next slot"},
                   c, why);
      }
      case SlotClass::other_sequence:
        return say("cross_sequence_write",
                   {first_words, "a sequence's slots hold another sequence's rows: the cache's sequence stride or the "
                                 "page table row is wrong"},
                   c, why);
      case SlotClass::values_differ:
        if (std::optional<Finding> heads = kv_heads_finding(members, p)) {
          heads->evidence.push_back("the first: " + first_words);
          return *heads;
        }
        if (std::optional<Finding> layout = kv_layout_finding(members, p)) {
          layout->evidence.push_back("the first: " + first_words);
          return *layout;
        }
        if (std::optional<Finding> codec = fit_fp8_codes(all, p)) {
          codec->evidence.push_back("the first: " + first_words);
          return *codec;
        }
        return say("stored_values_differ",
                   {first_words, std::string("the slots hold bytes that are no input row's stored form: the values are "
                                             "stored differently (") +
                                     (is_fp8(p.kv_format) ? "the FP8 encoding: rounding, saturation or the descale"
                                                          : "rounding or conversion to the storage dtype") +
                                     "); no kv head of those recorded is a whole head of another row"},
                   c, why);
    }
  }
  // Only the bookkeeping differs.
  const auto& tw = by_kind[Kind::tokens_written];
  std::set<std::int64_t> deltas;
  for (const CacheMismatch* x : tw) deltas.insert(x->got_value - x->expected_value);
  const CacheMismatch& m = *tw.front();
  std::ostringstream o;
  o << "after " << m.call << ", sequence " << m.sequence << " has tokens_written " << m.got_value << ", expected "
    << m.expected_value << "; every slot holds the right rows";
  std::ostringstream d;
  d << "reported minus expected: " << range_words(deltas) << " over " << tw.size() << " comparison(s)"
    << (*deltas.rbegin() < 0 ? ": the DUT does not count every row it was given" : ": the DUT counts rows it was not given")
    << (p.cache == CachePolicy::paged ? " (dut_v2.h: tokens_written counts positions [0, n) written, rows skipped for "
                                        "an unheld page included)"
                                      : "");
  return say("tokens_written_wrong", {o.str(), d.str()}, Confidence::high, "only tokens_written differs");
}

}  // namespace swa::harness
