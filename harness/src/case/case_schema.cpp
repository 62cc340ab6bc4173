#include "swa/harness/case/case_schema.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <type_traits>

#include "swa/enum_names.hpp"
#include "swa/paging.hpp"
#include "swa/harness/base/join.hpp"

namespace swa::harness {
namespace {

using Applies = std::function<bool(const Scenario&)>;
const Applies always = [](const Scenario&) { return true; };

std::optional<std::int64_t> parse_int(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// The shortest text that reads back to v: a float value in the ID; a range bound in fixed notation
// ("1000000", not "1e+06").
template <class T, class... Format>
std::string shortest(T v, Format... format) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v, format...);
  return std::string(buffer, ec == std::errc() ? end : buffer);
}
std::string bound(double v) { return shortest(v, std::chars_format::fixed); }

std::optional<std::string> check_int(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  const auto v = parse_int(text);
  if (!v) return "expected an integer, got '" + std::string(text) + "'";
  if (*v < lo || *v > hi)
    return "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(*v);
  out = *v;
  return std::nullopt;
}

// Where a parameter lives: a member of the Scenario, or (kernel) one of its pass-through kernel
// parameters, Scenario::kernel's AttnParams member.
template <class T>
auto at(T Scenario::*member) {
  return [member](auto& s) -> auto& { return s.*member; };
}
template <class T>
auto at(T AttnParams::*member) {
  return [member](auto& s) -> auto& { return s.kernel.*member; };
}

template <class Member>
CaseParam integer(std::string_view key, std::string_view id_key, Member member, std::int64_t lo, std::int64_t hi,
                  Applies applies = always) {
  CaseParam p{key, id_key, key, ColumnType::int64};
  p.allowed = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  p.get = [field = at(member)](const Scenario& s) { return std::to_string(field(s)); };
  p.set = [field = at(member), lo, hi](Scenario& s, std::string_view text) -> std::optional<std::string> {
    std::int64_t v = 0;
    if (auto error = check_int(text, lo, hi, v)) return error;
    auto& value = field(s);
    value = static_cast<std::remove_reference_t<decltype(value)>>(v);
    return std::nullopt;
  };
  p.applies = std::move(applies);
  return p;
}

template <class E, std::size_t N, class NameOf>
CaseParam choice(std::string_view key, std::string_view id_key, E Scenario::*member, const E (&all)[N], NameOf name_of,
                 Applies applies = always) {
  CaseParam p{key, id_key, key, ColumnType::text};
  p.allowed = enum_choices(all, name_of);
  p.get = [member, name_of](const Scenario& s) { return std::string(name_of(s.*member)); };
  p.set = [member, &all, name_of, allowed = p.allowed](Scenario& s, std::string_view text) -> std::optional<std::string> {
    const auto v = parse_enum(text, all, name_of);
    if (!v) return "'" + std::string(text) + "' is not one of " + allowed;
    s.*member = *v;
    return std::nullopt;
  };
  p.applies = std::move(applies);
  return p;
}

// A finite decimal number in [lo, hi], held as the nearest float (what every kernel is given); its
// canonical text, in the ID and the files, is the shortest that reads back to that float ("50", "0.1").
template <class Member>
CaseParam real(std::string_view key, std::string_view id_key, Member member, double lo, double hi) {
  CaseParam p{key, id_key, key, ColumnType::text};
  p.allowed = "a number in [" + bound(lo) + ", " + bound(hi) + "]";
  p.get = [field = at(member)](const Scenario& s) { return shortest(field(s)); };
  p.set = [field = at(member), lo, hi](Scenario& s, std::string_view text) -> std::optional<std::string> {
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() || !std::isfinite(v))
      return "expected a number, got '" + std::string(text) + "'";
    if (v < lo || v > hi) return "must be in [" + bound(lo) + ", " + bound(hi) + "], got " + std::string(text);
    field(s) = static_cast<float>(v);
    return std::nullopt;
  };
  p.applies = always;
  return p;
}

CaseParam lengths(std::string_view key, std::string_view id_key, std::string_view column,
                  std::vector<std::int32_t> Scenario::*member, std::int64_t lo, std::int64_t hi) {
  CaseParam p{key, id_key, column, ColumnType::text, true};
  p.allowed = "integers in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  p.get = [member](const Scenario& s) { return join(s.*member, ","); };
  p.set = [member, lo, hi](Scenario& s, std::string_view text) -> std::optional<std::string> {
    std::vector<std::int32_t> values;
    for (std::size_t begin = 0; begin <= text.size();) {
      const std::size_t end = std::min(text.find_first_of(",-", begin), text.size());
      std::int64_t v = 0;
      if (auto error = check_int(text.substr(begin, end - begin), lo, hi, v)) return error;
      values.push_back(static_cast<std::int32_t>(v));
      begin = end + 1;
    }
    s.*member = std::move(values);
    return std::nullopt;
  };
  p.applies = always;
  return p;
}

bool uses_cache(const Scenario& s) { return s.mode != RunMode::prefill; }
bool pages_cache(const Scenario& s) { return uses_cache(s) && s.cache == CachePolicy::paged; }
bool decodes(const Scenario& s) { return s.mode == RunMode::decode; }
bool has_mask(const Scenario& s) { return s.mask != MaskFormat::none; }

std::vector<CaseParam> build() {
  // The order is the ID's order.
  std::vector<CaseParam> t;
  t.push_back(choice("mode", "mode", &Scenario::mode, kAllRunModes, mode_name));
  t.push_back(lengths("batch", "seqs", "seq_lens", &Scenario::prompt_lens, 1, 1 << 24));
  t.push_back(integer("heads", "hq", &Scenario::heads, 1, 1024));
  t.push_back(integer("kv_heads", "hkv", &Scenario::kv_heads, 1, 1024));
  t.push_back(integer("head_size", "d", &Scenario::head_size, 1, 1024));
  t.push_back(integer("window", "w", &Scenario::window, 0, 1 << 24));
  t.push_back(integer("window_right", "wr", &Scenario::window_right, 0, 1 << 24));
  t.back().omitted_at_default = true;
  t.push_back(integer("chunk", "chunk", &Scenario::chunk, 0, 1 << 24, uses_cache));
  t.push_back(integer("decode_steps", "steps", &Scenario::decode_steps, 0, 1 << 20, decodes));
  t.push_back(choice("cache", "cache", &Scenario::cache, kAllCachePolicies, cache_name, uses_cache));
  t.push_back(integer("page_size", "page", &Scenario::page_size, 1, kMaxPageSize, pages_cache));
  t.push_back(choice("mask", "mask", &Scenario::mask, kAllMaskFormats, mask_format_name));
  t.push_back(choice("mask_generator", "gen", &Scenario::mask_generator, kAllAtbSamples, sample_name, has_mask));
  t.back().omitted_at_default = true;
  t.push_back(real("softcap", "cap", &Scenario::softcap, 0.0, 1e6));
  t.back().omitted_at_default = true;
  t.push_back(choice("sinks", "sinks", &Scenario::sinks, kAllSinks, sinks_name));
  t.back().omitted_at_default = true;
  t.push_back(choice("dtype", "", &Scenario::dtype, kAllDTypes, dtype_name));
  t.push_back(choice("kv_dtype", "kv", &Scenario::kv_dtype, kAllKvFormats, kv_format_name));
  t.back().omitted_at_default = true;
  t.push_back(choice("inputs", "in", &Scenario::inputs, kAllInputDistributions, distribution_name));
  t.push_back(integer("seed", "seed", &Scenario::seed, 0, INT64_MAX));
  return t;
}

}  // namespace

bool CaseParam::at_default(const Scenario& s) const { return get(s) == get(Scenario{}); }
bool CaseParam::named(const Scenario& s) const { return applies(s) && !(omitted_at_default && at_default(s)); }

const std::vector<CaseParam>& case_params() {
  static const std::vector<CaseParam> table = build();
  return table;
}

const CaseParam* find_case_param(std::string_view key) {
  for (const CaseParam& p : case_params())
    if (p.key == key) return &p;
  return nullptr;
}

void normalise(Scenario& s) {
  const Scenario defaults;
  for (const CaseParam& p : case_params())
    if (!p.applies(s)) p.set(s, p.get(defaults));
}

std::string case_yaml(const Scenario& s) {
  std::vector<std::string> parts;
  for (const CaseParam& p : case_params()) {
    if (!p.named(s)) continue;
    std::string value;
    for (char c : p.get(s)) value += c == ',' ? std::string(", ") : std::string(1, c);
    parts.push_back(std::string(p.key) + ": " + (p.list ? "[" + value + "]" : value));
  }
  return "{" + join(parts, ", ") + "}";
}

bool needs_atb_api(const Scenario& s) { return s.mode == RunMode::decode && s.mask != MaskFormat::none; }

std::map<std::string, std::string> case_attributes(const Scenario& s) {
  std::map<std::string, std::string> a;
  for (const CaseParam& p : case_params()) a[std::string(p.key)] = p.get(s);
  return a;
}

CaseColumns case_columns(const Scenario& s) {
  CaseColumns c;
  const auto& params = case_params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const CaseParam& p = params[i];
    if (p.column_type == ColumnType::int64)
      c.ints[i] = *parse_int(p.get(s));
    else
      c.text[i] = p.applies(s) ? p.get(s) : "none";
  }
  return c;
}

std::optional<std::string> scenario_from_columns(const CaseColumns& c, Scenario& s) {
  const auto& params = case_params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const CaseParam& p = params[i];
    const std::string text = p.column_type == ColumnType::int64 ? std::to_string(c.ints[i]) : c.text[i];
    if (text.empty()) continue;
    if (auto error = p.set(s, text)) {
      if (text == "none") continue;
      return "column " + std::string(p.column) + ": " + *error;
    }
  }
  return std::nullopt;
}

}  // namespace swa::harness
