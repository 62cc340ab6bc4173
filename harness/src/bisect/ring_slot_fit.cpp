// The ring's slot rule, fitted (ring_slot_fit.hpp).
#include "ring_slot_fit.hpp"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "swa/ring_slots.hpp"

namespace swa::harness {
namespace {

std::int64_t mod(std::int64_t a, std::int64_t m) { return ((a % m) + m) % m; }

std::int64_t first_write(const AttnParams& p, int b) {
  const std::int64_t prompt = prompt_len(p, b);
  return p.chunk > 0 ? std::min<std::int64_t>(p.chunk, prompt) : prompt;
}

// The first position of the call that writes position `pos` (a chunk's first, the prompt's, a decode step's own).
std::int64_t first_of_its_call(const AttnParams& p, int b, std::int64_t pos) {
  if (pos >= prompt_len(p, b)) return pos;
  return p.chunk > 0 ? pos / p.chunk * p.chunk : 0;
}

// A slot rule: where position p of sequence b is stored (positions below the base are not), in words.
struct SlotRule {
  std::string words;
  std::function<std::int64_t(int b)> base;
  std::function<std::int64_t(int b, std::int64_t pos)> slot;
};

struct Held {
  std::size_t agree = 0, told = 0, checked = 0;  // differing slots the rule accounts for; of them, placed unlike the spec
  bool every_held_agrees = true;
  std::size_t agreeing_checked = 0, agreeing_contradicted = 0;  // slots the DUT has right, the rule held to them
};

// The differing slots of a ring cache and the rules they are held to.
class RingFit {
 public:
  RingFit(const std::vector<CacheMismatch>& all, const AttnParams& p)
      : p_(p), w_(p.band.left + 1), compact_(p.cache == CachePolicy::ring_compact), cut_short_(all.size() >= 512) {
    for (const CacheMismatch& m : all)
      if (m.kind == CacheMismatch::Kind::slot) {
        slots_.push_back(&m);
        holding_ += holds_own(m);
        differing_[{m.call, m.sequence}].insert(m.slot);
        if (!m.model_positions.empty()) models_[{m.call, m.sequence}] = &m.model_positions;
      }
  }

  static bool holds_own(const CacheMismatch& m) {
    return m.held_kind == CacheMismatch::Held::position && m.held_sequence == m.sequence;
  }
  const std::vector<const CacheMismatch*>& slots() const { return slots_; }
  std::size_t holding() const { return holding_; }
  std::int64_t spec_base(int b) const { return compact_ ? compact_ring_base(first_write(p_, b), w_) : 0; }

  std::vector<SlotRule> rules() const {
    const AttnParams& p = p_;
    const std::int64_t w = w_;
    auto spec_base = [this](int b) { return this->spec_base(b); };
    std::vector<SlotRule> rules;
    auto base_rule = [&](std::string words, std::function<std::int64_t(int)> base, std::int64_t capacity) {
      rules.push_back({"slot (p - base) mod " + std::to_string(capacity) + " with " + words, base,
                       [capacity, base](int b, std::int64_t pos) { return mod(pos - base(b), capacity); }});
    };
    base_rule("the first sequence's base for every sequence", [spec_base](int) { return spec_base(0); }, w);
    base_rule("a base from the whole prompt, max(0, prompt - W), not from the first write",
              [&p, w](int b) { return compact_ring_base(prompt_len(p, b), w); }, w);
    base_rule("a base from the whole sequence, max(0, length - W)", [&p, w](int b) { return compact_ring_base(p.seq_lens[b], w); }, w);
    base_rule("base 0 (the modulo ring's rule)", [](int) { return std::int64_t{0}; }, w);
    base_rule("the compact ring's base, max(0, first write - W)", [&p, w](int b) { return compact_ring_base(first_write(p, b), w); }, w);
    base_rule("the next sequence's base", [&p, spec_base](int b) { return spec_base((b + 1) % p.batch); }, w);
    // (a ring one slot long would write past the cache's W slots: no kernel on this buffer has it)
    if (w > 1) base_rule("the spec's base but a ring of W - 1 slots (the window's left edge taken as the slot count)", spec_base, w - 1);
    if (const std::optional<std::int64_t> k = wrapped_shift(); k && *k != 0)
      rules.push_back({"the spec's slot, (p - base) mod W, except that the part of a call's write that wraps past slot W - 1 is copied from slot " +
                           std::to_string(*k) + " instead of slot 0 (the second of the write's two copies shifted)",
                       spec_base, [&p, w, spec_base, k = *k](int b, std::int64_t pos) {
                         const std::int64_t base = spec_base(b);
                         const std::int64_t first = std::max(first_of_its_call(p, b, pos), base);
                         const std::int64_t at = mod(pos - base, w), start = mod(first - base, w);
                         return pos - first < w && at < start ? mod(at + k, w) : at;
                       }});
    return rules;
  }

  // The rule against every differing slot, and against the slots the DUT has right in the calls
  // whose model positions were recorded (a call cut short by the record's limit is not held).
  Held hold(const SlotRule& rule) const {
    Held h;
    for (const CacheMismatch* m : slots_) {
      bool ok;
      if (holds_own(*m)) {
        ok = rule.slot(m->sequence, m->held) == m->slot;
        h.every_held_agrees = h.every_held_agrees && ok;
        h.told += ok && mod(m->held - spec_base(m->sequence), w_) != m->slot;
      } else if (m->held_kind == CacheMismatch::Held::zeros) {
        // The expected position went elsewhere under the rule, or is below its base (never stored).
        ok = m->expected >= 0 && (m->expected < rule.base(m->sequence) || rule.slot(m->sequence, m->expected) != m->slot);
      } else {
        ok = false;
      }
      h.agree += ok;
    }
    for (const auto& [key, positions] : models_) {
      if (cut_short_ && key.first == slots_.back()->call) continue;
      const std::set<std::int64_t>& off = differing_.at(key);
      for (std::int64_t s = 0; s < static_cast<std::int64_t>(positions->size()); ++s) {
        const std::int64_t pos = (*positions)[s];
        if (off.count(s) || pos < 0) continue;
        ++h.agreeing_checked;
        h.agreeing_contradicted += pos < rule.base(key.second) || rule.slot(key.second, pos) != s;
      }
    }
    return h;
  }

 private:
  // A call's write that wraps past the ring's end is two copies; the second (the wrapped segment)
  // placed from slot k instead of slot 0: k read off the rows held there, when they agree on one.
  std::optional<std::int64_t> wrapped_shift() const {
    std::set<std::int64_t> shifts;
    for (const CacheMismatch* m : slots_) {
      if (!holds_own(*m) || m->held < spec_base(m->sequence)) continue;
      const std::int64_t first = std::max(first_of_its_call(p_, m->sequence, m->held), spec_base(m->sequence));
      const std::int64_t at = mod(m->held - spec_base(m->sequence), w_), start = mod(first - spec_base(m->sequence), w_);
      if (m->held - first < w_ && at < start) shifts.insert(mod(m->slot - at, w_));
    }
    if (shifts.size() != 1) return std::nullopt;
    return *shifts.begin();
  }

  const AttnParams& p_;
  const std::int64_t w_;
  const bool compact_, cut_short_;
  std::vector<const CacheMismatch*> slots_;
  std::size_t holding_ = 0;
  std::map<std::pair<std::string, int>, std::set<std::int64_t>> differing_;
  std::map<std::pair<std::string, int>, const std::vector<std::int64_t>*> models_;
};

}  // namespace

std::optional<Finding> fit_ring_slot_rule(const std::vector<CacheMismatch>& all, const AttnParams& p) {
  const bool compact = p.cache == CachePolicy::ring_compact;
  if (p.mode == RunMode::prefill || !(compact || p.cache == CachePolicy::ring_modulo) || p.band.left < 0) return std::nullopt;
  const RingFit ring(all, p);
  const auto& slots = ring.slots();
  const std::size_t holding = ring.holding();
  if (holding == 0) return std::nullopt;
  for (const SlotRule& rule : ring.rules()) {
    // `told`: the rule places some held row where the spec does not, so it is not the spec itself.
    const Held h = ring.hold(rule);
    if (!h.every_held_agrees || h.told == 0 || h.agree * 10 < slots.size() * 9 || h.agreeing_contradicted > 0) continue;
    std::map<int, std::pair<std::int64_t, std::int64_t>> per;  // sequence -> (the rule's base, the spec's)
    for (const CacheMismatch* m : slots) per[m->sequence] = {rule.base(m->sequence), ring.spec_base(m->sequence)};
    std::ostringstream o, n;
    o << "the DUT stores position p of a sequence at " << rule.words << ": ";
    bool first = true;
    for (const auto& [b, bases] : per) {
      o << (first ? "" : "; ") << "sequence " << b << " base " << bases.first << ", the rule's " << bases.second;
      first = false;
    }
    n << h.agree << " of the " << slots.size() << " differing slots recorded agree with it, every one of the " << holding
      << " that hold a row of their sequence included";
    if (h.agreeing_checked > 0) n << ", and so do all " << h.agreeing_checked << " slots the DUT has right in those calls";
    return Finding{"ring_slot_rule_wrong", FindingSource::cache_check, {o.str(), n.str()}, Confidence::high, n.str()};
  }
  return std::nullopt;
}

}  // namespace swa::harness
