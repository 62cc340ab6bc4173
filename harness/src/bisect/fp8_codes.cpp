// bisect: the FP8 codes a DUT stored, fitted as a region where they differ and a rule of what it stores.
#include "fp8_codes.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>

#include "swa/kv_format.hpp"
#include "swa/readings.hpp"

namespace swa::harness {
namespace {

using Code = CacheMismatch::StoredCode;

struct Region {
  std::string name, words;
  std::function<bool(const Code&)> holds;
};

struct Rule {
  std::string words;
  std::function<bool(const Code&)> gives;  // the DUT's code at this element is the rule's
};

double magnitude_log2(double x) { return std::floor(std::log2(std::abs(x))); }

std::vector<Region> regions(KvFormat f, const std::vector<Code>& codes) {
  const int mantissa_bits = f == KvFormat::fp8_e4m3 ? 3 : 2;
  const double min_normal = fp8_decode(f, static_cast<std::uint8_t>(1u << mantissa_bits)), top = fp8_max(f);
  auto spec = [f](const Code& c) { return fp8_decode(f, c.expected); };
  auto neighbours_tie = [f, spec](const Code& c) {
    const double v = std::abs(spec(c)), x = std::abs(c.encoded);
    const std::uint8_t mag = c.expected & 0x7f;
    const double other = x > v ? fp8_decode(f, static_cast<std::uint8_t>(mag + 1)) : mag > 0 ? fp8_decode(f, static_cast<std::uint8_t>(mag - 1)) : 0.0;
    return x != v && std::abs(x - v) == std::abs(other - x);
  };
  auto power_of_two = [](double v) { return v > 0 && std::exp2(std::round(std::log2(v))) == v; };
  std::vector<Region> r = {
      {"subnormals", "the subnormal values (0 < |x| < " + std::to_string(min_normal) + ")",
       [=](const Code& c) { return c.encoded != 0 && std::abs(c.encoded) < min_normal; }},
      {"top_subnormal_binade", "the top binade of the subnormals (" + std::to_string(min_normal / 2) + " <= |x| < " + std::to_string(min_normal) + ")",
       [=](const Code& c) { return std::abs(c.encoded) >= min_normal / 2 && std::abs(c.encoded) < min_normal; }},
      {"carry_into_exponent", "the values whose rounding carries into the next binade (their nearest FP8 value is a power of two above them)",
       [=](const Code& c) { const double v = std::abs(spec(c)); return power_of_two(v) && v > std::abs(c.encoded) && v <= top; }},
      {"past_the_largest", "the values past the format's largest (|x| > " + std::to_string(top) + ")",
       [=](const Code& c) { return std::abs(c.encoded) > top; }},
      {"ties", "the values exactly halfway between two FP8 values", neighbours_tie},
      {"rounded_up", "the values the spec rounds away from zero", [=](const Code& c) { return std::abs(spec(c)) > std::abs(c.encoded); }},
      {"rounded_down", "the values the spec rounds toward zero", [=](const Code& c) { return std::abs(spec(c)) < std::abs(c.encoded); }},
      {"negative", "the negative values", [](const Code& c) { return c.encoded < 0; }},
      {"positive", "the positive values", [](const Code& c) { return c.encoded > 0; }},
      {"zeros", "the zeros", [](const Code& c) { return c.encoded == 0; }},
      {"every_value", "every value", [](const Code&) { return true; }},
  };
  std::vector<double> binades;
  for (const Code& c : codes)
    if (c.differs && c.encoded != 0 && std::find(binades.begin(), binades.end(), magnitude_log2(c.encoded)) == binades.end())
      binades.push_back(magnitude_log2(c.encoded));
  if (binades.size() == 1) {
    const double e = binades[0];
    r.push_back({"binade_2^" + std::to_string(static_cast<int>(e)), "the values in [2^" + std::to_string(static_cast<int>(e)) + ", 2^" +
                 std::to_string(static_cast<int>(e) + 1) + ")", [e](const Code& c) { return c.encoded != 0 && magnitude_log2(c.encoded) == e; }});
  }
  return r;
}

std::vector<Rule> rules(KvFormat f, const AttnParams& p) {
  auto value = [f](std::uint8_t code) { return fp8_decode(f, code); };
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  auto rounded = [f, value, same](golden::Fp8Rounding mode) {
    return [=](const Code& c) { return same(value(c.got), golden::fp8_round(f, mode, true, c.encoded)); };
  };
  return {
      {"one code toward zero from the spec's (the value truncated, not rounded)",
       [](const Code& c) { return (c.expected & 0x7f) > 0 && c.got == static_cast<std::uint8_t>(c.expected - 1); }},
      {"one code away from zero from the spec's", [](const Code& c) { return (c.expected & 0x7f) < 0x7e && c.got == static_cast<std::uint8_t>(c.expected + 1); }},
      {"half the spec's value (the exponent's carry lost: the mantissa wraps to zero in the old binade)",
       [=](const Code& c) { return value(c.got) == value(c.expected) / 2; }},
      {"twice the spec's value", [=](const Code& c) { return value(c.got) == value(c.expected) * 2; }},
      {"zero (flushed)", [=](const Code& c) { return value(c.got) == 0; }},
      {"NaN or infinity (no saturation)", [=](const Code& c) { return !std::isfinite(value(c.got)); }},
      {"the format's largest value, with the value's sign", [=](const Code& c) { return std::abs(value(c.got)) == fp8_max(f) && (value(c.got) < 0) == (c.encoded < 0); }},
      {"the spec's code with the sign flipped", [](const Code& c) { return c.got == (c.expected ^ 0x80); }},
      {"the value rounded toward zero", rounded(golden::Fp8Rounding::toward_zero)},
      {"the value rounded to nearest, ties away from zero", rounded(golden::Fp8Rounding::ties_away)},
      {"the code of the input itself (not divided by its descale)",
       [=, &p](const Code& c) { return same(value(c.got), value(fp8_encode(f, c.encoded * (c.value ? p.v_descale : p.k_descale)))); }},
      {"the code of the input divided by its descale twice",
       [=, &p](const Code& c) { return same(value(c.got), value(fp8_encode(f, c.encoded / (c.value ? p.v_descale : p.k_descale)))); }},
  };
}

}  // namespace

std::optional<Finding> fit_fp8_codes(const std::vector<CacheMismatch>& mismatches, const AttnParams& p) {
  if (!is_fp8(p.kv_format)) return std::nullopt;
  // Slots that hold their own row with some codes off (a misplaced row has most of its codes off).
  std::vector<Code> codes;
  std::size_t slots = 0;
  for (const CacheMismatch& m : mismatches) {
    if (m.codes.empty()) continue;
    const auto off = std::count_if(m.codes.begin(), m.codes.end(), [](const Code& c) { return c.differs; });
    if (off * 2 > static_cast<std::ptrdiff_t>(m.codes.size())) continue;
    codes.insert(codes.end(), m.codes.begin(), m.codes.end());
    ++slots;
  }
  const auto differing = std::count_if(codes.begin(), codes.end(), [](const Code& c) { return c.differs; });
  if (differing == 0) return std::nullopt;
  const KvFormat f = p.kv_format;
  const std::string format = f == KvFormat::fp8_e4m3 ? "e4m3" : "e5m2";
  // The simplest region holding every differing element; exact when no element of it is right.
  const Region* region = nullptr;
  std::int64_t inside = 0;
  bool exact = false;
  const std::vector<Region> all_regions = regions(f, codes);
  for (const Region& r : all_regions) {
    if (!std::all_of(codes.begin(), codes.end(), [&](const Code& c) { return !c.differs || r.holds(c); })) continue;
    const std::int64_t n = std::count_if(codes.begin(), codes.end(), [&](const Code& c) { return r.holds(c); });
    const bool e = n == differing;
    if (!region || (e && !exact) || (e == exact && n < inside)) region = &r, inside = n, exact = e;
  }
  if (!region) return std::nullopt;
  const Rule* rule = nullptr;
  const std::vector<Rule> all_rules = rules(f, p);
  for (const Rule& r : all_rules)
    if (std::all_of(codes.begin(), codes.end(), [&](const Code& c) { return !c.differs || r.gives(c); })) {
      rule = &r;
      break;
    }
  std::ostringstream where, what, share;
  where << "The DUT's " << format << " encoder differs from the spec's (round to nearest even, saturating) on " << region->words
        << ": " << differing << " of the " << codes.size() << " codes of the " << slots
        << " slots recorded with their codes differ, each in that region";
  if (exact) where << ", and every element of it differs (" << inside << ")";
  else where << "; " << inside - differing << " of its " << inside << " elements are stored right";
  where << ".";
  if (rule) what << "There it stores " << rule->words << ", in every one of the " << differing << " differing codes.";
  else what << "No rule of the spec's code or of the value gives every code it stores there.";
  for (const Code& c : codes)
    if (c.differs) {
      what << " For example " << (c.value ? "V" : "K") << " head " << c.head << " dim " << c.dim << ": x = " << c.encoded << ", the spec's code 0x"
           << std::hex << int(c.expected) << " (" << fp8_decode(f, c.expected) << "), the DUT's 0x" << int(c.got) << std::dec << " ("
           << fp8_decode(f, c.got) << ").";
      break;
    }
  // Regions the codes do not tell apart: exact too, on the same elements.
  std::string alike;
  for (const Region& r : all_regions)
    if (&r != region && exact && std::all_of(codes.begin(), codes.end(), [&](const Code& c) { return r.holds(c) == c.differs; }))
      alike += (alike.empty() ? "" : "; ") + r.words;
  std::vector<std::string> evidence = {where.str(), what.str()};
  if (!alike.empty()) evidence.push_back("The same codes differ on, not told apart by these values: " + alike + ".");
  // A region is told by enough codes, not by one: high needs a fit of every code and this many differing.
  constexpr std::int64_t kEnough = 8;
  const bool fitted = exact && rule && differing >= kEnough;
  share << differing << " differing code(s); " << (exact ? "the region is exact" : "the region is not exact")
        << (rule ? ", one rule gives every differing code" : ", no rule gives the codes");
  if (exact && rule && !fitted) share << "; fewer than " << kEnough << " codes: at most medium";
  Finding found{"fp8_encoding_differs_on_" + region->name, FindingSource::cache_check, evidence,
                fitted ? Confidence::high : Confidence::medium, share.str()};
  found.reproduced = fitted;
  return found;
}

}  // namespace swa::harness
