// The ring's slot rule, fitted (ring_slot_fit.hpp).
#include "ring_slot_fit.hpp"

#include <functional>
#include <map>
#include <sstream>

#include "swa/ring_slots.hpp"

namespace swa::harness {
namespace {

struct BaseRule {
  const char* words;  // "the first sequence's base for every sequence"
  std::function<std::int64_t(int b)> base;
  std::int64_t capacity_delta = 0;  // slots taken as W + this
};

std::int64_t first_write(const AttnParams& p, int b) {
  const std::int64_t prompt = prompt_len(p, b);
  return p.chunk > 0 ? std::min<std::int64_t>(p.chunk, prompt) : prompt;
}

std::int64_t mod(std::int64_t a, std::int64_t m) { return ((a % m) + m) % m; }

}  // namespace

std::optional<Finding> fit_ring_slot_rule(const std::vector<CacheMismatch>& all, const AttnParams& p) {
  const bool compact = p.cache == CachePolicy::ring_compact;
  if (p.mode == RunMode::prefill || !(compact || p.cache == CachePolicy::ring_modulo) || p.band.left < 0) return std::nullopt;
  const std::int64_t w = p.band.left + 1;
  auto spec_base = [&, compact](int b) { return compact ? compact_ring_base(first_write(p, b), w) : 0; };
  const std::vector<BaseRule> rules = {
      {"the first sequence's base for every sequence", [&](int) { return spec_base(0); }},
      {"a base from the whole prompt, max(0, prompt - W), not from the first write",
       [&](int b) { return compact_ring_base(prompt_len(p, b), w); }},
      {"a base from the whole sequence, max(0, length - W)", [&](int b) { return compact_ring_base(p.seq_lens[b], w); }},
      {"base 0 (the modulo ring's rule)", [](int) { return std::int64_t{0}; }},
      {"the compact ring's base, max(0, first write - W)", [&](int b) { return compact_ring_base(first_write(p, b), w); }},
      {"the next sequence's base", [&](int b) { return spec_base((b + 1) % p.batch); }},
      // (a ring one slot long would write past the cache's W slots: no kernel on this buffer has it)
      {"the spec's base but a ring of W - 1 slots (the window's left edge taken as the slot count)", spec_base, -1},
  };
  std::vector<const CacheMismatch*> slots;
  std::size_t holding = 0;
  for (const CacheMismatch& m : all)
    if (m.kind == CacheMismatch::Kind::slot) {
      slots.push_back(&m);
      holding += m.held_kind == CacheMismatch::Held::position && m.held_sequence == m.sequence;
    }
  if (holding == 0) return std::nullopt;
  for (const BaseRule& rule : rules) {
    const std::int64_t c = w + rule.capacity_delta;
    if (c < 1) continue;
    bool differs = rule.capacity_delta != 0;  // from the spec, for a sequence whose slots differ
    std::size_t agree = 0;
    bool every_held_agrees = true;
    std::size_t told = 0;  // rows the rule places where the spec's formula does not: what only the rule explains
    for (const CacheMismatch* m : slots) {
      const std::int64_t base = rule.base(m->sequence);
      differs = differs || base != spec_base(m->sequence);
      const bool holds = m->held_kind == CacheMismatch::Held::position && m->held_sequence == m->sequence;
      bool ok;
      if (holds) {
        ok = mod(m->held - base, c) == m->slot;
        every_held_agrees = every_held_agrees && ok;
        told += ok && mod(m->held - spec_base(m->sequence), w) != m->slot;
      } else if (m->held_kind == CacheMismatch::Held::zeros) {
        // The expected position went elsewhere under the rule, or is below its base (never stored).
        ok = m->expected >= 0 && (m->expected < base || mod(m->expected - base, c) != m->slot);
      } else {
        ok = false;
      }
      agree += ok;
    }
    if (!differs || !every_held_agrees || told == 0 || agree * 10 < slots.size() * 9) continue;
    std::map<int, std::pair<std::int64_t, std::int64_t>> per;  // sequence -> (the rule's base, the spec's)
    for (const CacheMismatch* m : slots) per[m->sequence] = {rule.base(m->sequence), spec_base(m->sequence)};
    std::ostringstream o, n;
    o << "the DUT stores position p of a sequence at slot (p - base) mod " << c << " with " << rule.words << ": ";
    bool first = true;
    for (const auto& [b, bases] : per) {
      o << (first ? "" : "; ") << "sequence " << b << " base " << bases.first << ", the rule's " << bases.second;
      first = false;
    }
    n << agree << " of the " << slots.size() << " differing slots recorded agree with it, every one of the " << holding
      << " that hold a row of their sequence included";
    return Finding{"ring_slot_rule_wrong", FindingSource::cache_check, {o.str(), n.str()}, Confidence::high, n.str()};
  }
  return std::nullopt;
}

}  // namespace swa::harness
