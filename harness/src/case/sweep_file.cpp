#include "swa/harness/case/sweep_file.hpp"

#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/base/id_pattern.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/base/join.hpp"
#include "swa/harness/base/philox.hpp"

namespace swa::harness {
namespace {

// ---- error reporting -------------------------------------------------------------------------
struct Where {
  const std::string* path;
  std::string key;  // dotted path of the key, e.g. sweeps.ci.matrix.heads
  YAML::Mark mark;
};

[[noreturn]] void fail(const Where& w, const std::string& message) {
  std::ostringstream o;
  o << *w.path;
  if (!w.mark.is_null()) o << ":" << w.mark.line + 1 << ":" << w.mark.column + 1;
  o << ": " << w.key << ": " << message;
  throw SweepError(o.str());
}

Where child(const Where& w, const std::string& key, const YAML::Node& node) {
  return {w.path, w.key + "." + key, node.Mark()};
}

// The whole document before any meaning is read: every key of every mapping a plain scalar, and
// none twice (yaml-cpp keeps the first of two equal keys and drops the second without a word).
void check_keys(const Where& w, const YAML::Node& node) {
  auto sub = [&](const std::string& key, const YAML::Node& n) {
    return Where{w.path, w.key.empty() ? key : w.key + "." + key, n.Mark()};
  };
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) check_keys(sub(std::to_string(i), node[i]), node[i]);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      fail({w.path, w.key.empty() ? "(top level)" : w.key, kv.first.Mark()}, "a key must be a plain name, not a " +
                                                 std::string(kv.first.IsSequence() ? "list" : "mapping"));
    const std::string key = kv.first.Scalar();
    if (const auto [it, fresh] = seen.emplace(key, kv.first.Mark()); !fresh)
      fail(sub(key, kv.first), "'" + key + "' appears twice in this mapping (first at line " +
                                   std::to_string(it->second.line + 1) + "); YAML keeps only one");
    check_keys(sub(key, kv.second), kv.second);
  }
}

// The first byte that is not UTF-8, as line:column, or nullopt. IDs, names and the stored sweep text
// are UTF-8 strings in HDF5: bytes that are not become errors in every reader (report's Python).
std::optional<std::pair<int, int>> first_non_utf8(const std::string& text) {
  int line = 1, column = 1;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size() && !(n == 2 && c < 0xc2);
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    if (ok && n == 3) {  // no overlong forms, no surrogates
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
    }
    if (ok && n == 4) {
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      ok = c <= 0xf4 && !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (!ok) return std::pair{line, column};
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += n;
  }
  return std::nullopt;
}

void require_keys(const Where& w, const YAML::Node& map, const std::set<std::string>& allowed) {
  if (!map.IsMap()) fail(w, "expected a mapping");
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (allowed.count(key)) continue;
    const std::string list = join(allowed, ", ");
    fail(child(w, key, kv.first), "unknown key '" + key + "' (allowed: " + list + ")");
  }
}

std::int64_t as_int(const Where& w, const YAML::Node& n, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<std::int64_t>::decode(n, v))
    fail(w, "expected an integer, got " + (n.IsScalar() ? "'" + n.Scalar() + "'" : std::string("a collection")));
  if (v < lo || v > hi)
    fail(w, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  return v;
}

double as_double(const Where& w, const YAML::Node& n) {
  double v = 0;
  // Finite: `.inf` as a tolerance factor would switch its check off without saying so.
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !(v >= 0) || !std::isfinite(v))
    fail(w, "expected a finite non-negative number, got " +
                (n.IsScalar() ? "'" + n.Scalar() + "'" : std::string("a collection")));
  return v;
}

std::string as_string(const Where& w, const YAML::Node& n) {
  if (!n.IsScalar()) fail(w, "expected a string");
  return n.Scalar();
}

template <class T>
T as_choice(const Where& w, const YAML::Node& n, const std::optional<T>& parsed, const std::string& choices) {
  if (!parsed) fail(w, "'" + as_string(w, n) + "' is not one of " + choices);
  return *parsed;
}

// ---- one scenario under construction ---------------------------------------------------------
struct BatchSpec {
  std::vector<std::int32_t> lengths;  // explicit
  std::int64_t size = 0, min = 0, max = 0;  // or drawn: size sequences, lengths uniform in [min, max]
};

struct Draft {
  Scenario s;
  BatchSpec batch;
  std::map<std::string, Where> where;  // source of each parameter set, for later errors
  bool kv_heads_set() const { return where.count("kv_heads") > 0; }
};

BatchSpec parse_batch(const Where& w, const YAML::Node& n) {
  BatchSpec b;
  if (n.IsScalar()) {
    b.lengths.push_back(static_cast<std::int32_t>(as_int(w, n, 1, 1 << 24)));
  } else if (n.IsSequence()) {
    if (n.size() == 0) fail(w, "a batch needs at least one sequence length");
    for (const auto& len : n) b.lengths.push_back(static_cast<std::int32_t>(as_int(w, len, 1, 1 << 24)));
  } else if (n.IsMap()) {
    require_keys(w, n, {"size", "min", "max"});
    if (!n["size"] || !n["min"] || !n["max"]) fail(w, "a drawn batch needs size, min and max");
    b.size = as_int(child(w, "size", n["size"]), n["size"], 1, 4096);
    b.min = as_int(child(w, "min", n["min"]), n["min"], 1, 1 << 24);
    b.max = as_int(child(w, "max", n["max"]), n["max"], b.min, 1 << 24);
  } else {
    fail(w, "expected a sequence length, a list of them, or {size, min, max}");
  }
  return b;
}

// The sweep file's parameter keys are the case parameters (case_schema.hpp); a list parameter (the
// batch) may also be drawn.
void apply(Draft& d, const Where& w, const std::string& key, const YAML::Node& n) {
  const CaseParam& p = *find_case_param(key);
  if (p.list) {
    d.batch = parse_batch(w, n);
  } else {
    if (!n.IsScalar())
      fail(w, p.column_type == ColumnType::int64 ? "expected an integer, got a collection" : "expected a string");
    if (auto error = p.set(d.s, n.Scalar())) fail(w, *error);
  }
  d.where.insert_or_assign(key, w);
}

std::set<std::string> parameter_keys() {
  std::set<std::string> keys;
  for (const CaseParam& p : case_params()) keys.insert(std::string(p.key));
  return keys;
}

// Lengths of a drawn batch: uniform in [min, max] from the scenario's seed, stream 4.
std::vector<std::int32_t> draw_lengths(const BatchSpec& b, std::uint64_t seed) {
  std::vector<std::int32_t> out;
  for (std::int64_t i = 0; i < b.size; ++i) {
    const auto r = philox4x32_10({static_cast<std::uint32_t>(i), 0u, 4u, 0u},
                                 {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
    out.push_back(static_cast<std::int32_t>(b.min + r[0] % static_cast<std::uint32_t>(b.max - b.min + 1)));
  }
  return out;
}

// ---- sweep-level settings --------------------------------------------------------------------

// ATB SelfAttention compatibility matrix (seed 003), SWA column: the features marked N.
const std::map<std::string, std::string>& atb_features_incompatible_with_swa() {
  static const std::map<std::string, std::string> m = {
      {"dynamic_batch", "控制可计算batch (batchRunStatusEnable)"},
      {"high_precision", "高精度 (KERNELTYPE_HIGH_PRECISION)"},
      {"clamp", "clamp缩放 (CLAMP_TYPE_MIN_MAX)"},
      {"logn", "logN缩放 (SCALE_TYPE_LOGN)"},
      {"qkv_quant", "qkv全量化 (quantType)"},
      {"bnsd", "BNSD维度输入 (TYPE_BNSD)"},
      {"kv_tensorlist", "kv tensorlist格式输入"},
      {"mla", "MLA合并输入kvcache (mlaVHeadSize > 0)"},
  };
  return m;
}
// Features the matrix marks Y with SWA.
const std::set<std::string> kAtbFeaturesCompatibleWithSwa = {"split_prefill_decode", "compress_mask", "kv_bypass"};

struct SweepSettings {
  Api api = Api::generic;
  std::vector<std::pair<std::string, Where>> atb_features;
  std::vector<std::string> duts;
  ToleranceProfile profile = ToleranceProfile::standard;
  std::map<DType, Tolerance> tolerance;  // per-dtype overrides of the profile's limits
  std::int64_t memory_limit = 0;
  std::optional<PerfSettings> perf;
  bool cache_check = true;
};

// ---- validation of one finished scenario -----------------------------------------------------
Scenario finalize(Draft d, const SweepSettings& settings, const Where& sweep_where) {
  auto where = [&](const std::string& key) { return d.where.count(key) ? d.where.at(key) : sweep_where; };
  Scenario& s = d.s;
  s.prompt_lens = d.batch.size > 0 ? draw_lengths(d.batch, s.seed) : d.batch.lengths;
  if (!d.kv_heads_set()) s.kv_heads = s.heads;
  normalise(s);  // parameters the scenario does not use, back to their defaults: one case, one ID
  if (auto fault = scenario_fault(s, settings.api)) fail(where(std::string(fault->key)), fault->message);
  if (settings.api == Api::atb && s.window > 0)
    for (const auto& [feature, w] : settings.atb_features)
      if (atb_features_incompatible_with_swa().count(feature))
        fail(w, "ATB SWA does not combine with " + atb_features_incompatible_with_swa().at(feature) +
                    " (SelfAttention feature compatibility matrix)");
  const std::int64_t need = estimate_memory_bytes(s.problem_spec());
  if (need > settings.memory_limit)
    fail(where("batch"), "scenario " + s.id() + " needs about " + std::to_string(need >> 20) +
                             " MiB, over the limit of " + std::to_string(settings.memory_limit >> 20) + " MiB");
  s.tolerance = settings.tolerance.count(s.dtype) ? settings.tolerance.at(s.dtype) : tolerance_for(settings.profile, s.dtype);
  s.duts = settings.duts;
  s.perf = settings.perf;
  s.cache_check = settings.cache_check;
  return s;
}

// ---- expansion -------------------------------------------------------------------------------
struct Axis {
  std::string key;
  std::vector<YAML::Node> values;
  Where where;
};

void apply_map(Draft& d, const Where& w, const YAML::Node& map) {
  require_keys(w, map, parameter_keys());
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    apply(d, child(w, key, kv.second), key, kv.second);
  }
}

bool same_parameters(const Draft& a, const Draft& b) {
  for (const CaseParam& p : case_params())
    if (!p.list && p.get(a.s) != p.get(b.s)) return false;
  return a.kv_heads_set() == b.kv_heads_set() && a.batch.lengths == b.batch.lengths && a.batch.size == b.batch.size &&
         a.batch.min == b.batch.min && a.batch.max == b.batch.max;
}

// A combination matches an exclude entry when setting the entry's keys changes nothing.
bool matches(const Draft& combo, const Where& w, const YAML::Node& entry) {
  Draft probe = combo;
  for (const auto& kv : entry) {
    const std::string key = kv.first.as<std::string>();
    apply(probe, child(w, key, kv.second), key, kv.second);
  }
  return same_parameters(combo, probe);
}

// Boundary cases around each window: W = 1, W = L-1, L, L+1, W = tile +- 1, chunk = W +- 1, a ring
// wrap exactly at a chunk boundary, a prompt that is a multiple of W, a length-1 sequence in a batch.
std::vector<Draft> edge_cases(const std::vector<Draft>& combos) {
  // The ATB mask block, a fact of the spec (seed 003), and the most common kernel tile. Not read
  // from the DUTs' traits: a sweep's scenarios must not change with --dut.
  constexpr std::int64_t kTile = 128;
  std::vector<Draft> out;
  std::set<std::pair<std::int64_t, int>> seen;  // (window, mode)
  for (const Draft& base : combos) {
    if (base.s.window == 0 || !seen.insert({base.s.window, static_cast<int>(base.s.mode)}).second) continue;
    const std::int64_t w = base.s.window;
    const std::int32_t len = base.batch.lengths.empty() ? 64 : *std::max_element(base.batch.lengths.begin(), base.batch.lengths.end());
    auto variant = [&](std::int64_t window, std::vector<std::int32_t> lens, int chunk) {
      Draft d = base;
      d.s.window = window;
      d.batch = BatchSpec{std::move(lens)};
      if (chunk > 0) d.s.chunk = chunk;
      out.push_back(d);
    };
    variant(1, {len}, 0);
    for (std::int64_t dw : {-1, 0, 1})
      if (len + dw >= 1) variant(len + dw, {len}, 0);
    variant(kTile - 1, {static_cast<std::int32_t>(2 * kTile + 3)}, 0);
    variant(kTile + 1, {static_cast<std::int32_t>(2 * kTile + 3)}, 0);
    variant(w, {static_cast<std::int32_t>(3 * w)}, 0);  // prompt a multiple of W
    variant(w, {len, 1, len / 2 + 1}, 0);               // a length-1 sequence in a ragged batch
    if (base.s.mode != RunMode::prefill) {
      if (w > 1) variant(w, {static_cast<std::int32_t>(3 * w + 2)}, static_cast<int>(w - 1));
      variant(w, {static_cast<std::int32_t>(3 * w + 2)}, static_cast<int>(w + 1));
      variant(w, {static_cast<std::int32_t>(2 * w)}, static_cast<int>(w));  // wrap exactly at a chunk boundary
    }
  }
  return out;
}

// api: and atb_features: (which need api: atb).
void read_api(SweepSettings& settings, const YAML::Node& node, const Where& w) {
  if (node["api"]) {
    const std::string api = as_string(child(w, "api", node["api"]), node["api"]);
    if (api != "generic" && api != "atb") fail(child(w, "api", node["api"]), "'" + api + "' is not one of generic|atb");
    settings.api = api == "atb" ? Api::atb : Api::generic;
  }
  if (node["atb_features"]) {
    const Where fw = child(w, "atb_features", node["atb_features"]);
    if (settings.api != Api::atb) fail(fw, "atb_features needs api: atb");
    if (!node["atb_features"].IsSequence()) fail(fw, "expected a list");
    for (const auto& f : node["atb_features"]) {
      const Where ew = child(w, "atb_features", f);
      const std::string feature = as_string(ew, f);
      if (!atb_features_incompatible_with_swa().count(feature) && !kAtbFeaturesCompatibleWithSwa.count(feature)) {
        std::string all;
        for (const auto& [k, _] : atb_features_incompatible_with_swa()) all += k + "|";
        for (const auto& k : kAtbFeaturesCompatibleWithSwa) all += k + "|";
        all.pop_back();
        fail(ew, "unknown ATB feature '" + feature + "' (allowed: " + all + ")");
      }
      settings.atb_features.push_back({feature, ew});
    }
  }
}

void read_duts(SweepSettings& settings, const YAML::Node& node, const Where& w) {
  if (node["duts"]) {
    const Where dw = child(w, "duts", node["duts"]);
    if (!node["duts"].IsSequence()) fail(dw, "expected a list of DUT names");
    for (const auto& d : node["duts"]) {
      const std::string dut = as_string(child(w, "duts", d), d);
      if (std::find(settings.duts.begin(), settings.duts.end(), dut) != settings.duts.end())
        fail(child(w, "duts", d), "'" + dut + "' is named twice; name each DUT once");
      settings.duts.push_back(dut);
    }
  }
}

// tolerance_profile: and the per-dtype tolerance: limits over it.
void read_tolerances(SweepSettings& settings, const YAML::Node& node, const Where& w) {
  if (node["tolerance_profile"]) {
    const Where pw = child(w, "tolerance_profile", node["tolerance_profile"]);
    settings.profile = as_choice(pw, node["tolerance_profile"], parse_profile(as_string(pw, node["tolerance_profile"])),
                                 profile_choices());
  }
  if (node["tolerance"]) {
    const Where tw = child(w, "tolerance", node["tolerance"]);
    require_keys(tw, node["tolerance"], {"fp32", "fp16", "bf16"});
    const std::vector<std::pair<std::string, double Tolerance::*>> limits = {
        {"rtol_factor", &Tolerance::rtol_factor}, {"atol_floor", &Tolerance::atol_floor},
        {"l2_factor", &Tolerance::l2_factor},     {"l2_floor", &Tolerance::l2_floor},
        {"warn_l2_factor", &Tolerance::warn_l2_factor}, {"nmse_max", &Tolerance::nmse_max}};
    std::set<std::string> limit_names;
    for (const auto& [name, _] : limits) limit_names.insert(name);
    for (const auto& kv : node["tolerance"]) {
      const std::string dt = kv.first.as<std::string>();
      const Where dw = child(tw, dt, kv.second);
      require_keys(dw, kv.second, limit_names);
      Tolerance t = tolerance_for(settings.profile, *parse_dtype(dt));
      for (const auto& [name, member] : limits)
        if (kv.second[name]) t.*member = as_double(child(dw, name, kv.second[name]), kv.second[name]);
      settings.tolerance[*parse_dtype(dt)] = t;
    }
  }
}

// perf: true|false or {warmups, repeats}.
void read_perf(SweepSettings& settings, const YAML::Node& node, const Where& w) {
  if (node["perf"]) {
    const Where pw = child(w, "perf", node["perf"]);
    bool on = false;
    if (node["perf"].IsScalar() && YAML::convert<bool>::decode(node["perf"], on)) {
      if (on) settings.perf = PerfSettings{};
    } else {
      require_keys(pw, node["perf"], {"warmups", "repeats"});
      PerfSettings ps;
      if (node["perf"]["warmups"]) ps.warmups = static_cast<int>(as_int(child(pw, "warmups", node["perf"]["warmups"]), node["perf"]["warmups"], 0, 100));
      if (node["perf"]["repeats"]) ps.repeats = static_cast<int>(as_int(child(pw, "repeats", node["perf"]["repeats"]), node["perf"]["repeats"], 1, 1000));
      settings.perf = ps;
    }
  }
}

SweepSettings read_settings(const YAML::Node& node, const Where& w, std::int64_t memory_limit) {
  SweepSettings settings;
  settings.memory_limit = memory_limit;
  read_api(settings, node, w);
  read_duts(settings, node, w);
  read_tolerances(settings, node, w);
  if (node["cache_check"] &&
      (!node["cache_check"].IsScalar() || !YAML::convert<bool>::decode(node["cache_check"], settings.cache_check)))
    fail(child(w, "cache_check", node["cache_check"]), "expected true or false");

  read_perf(settings, node, w);
  return settings;
}

std::vector<Axis> read_axes(const YAML::Node& node, const Where& w) {
  std::vector<Axis> axes;
  if (!node["matrix"] && !node["include"])
    fail(w, "has neither matrix: nor include:; give it at least one axis or one included case");
  if (node["matrix"]) {
    const Where mw = child(w, "matrix", node["matrix"]);
    require_keys(mw, node["matrix"], parameter_keys());
    if (node["matrix"].size() == 0)
      fail(mw, "is empty; list at least one axis (a single value is an axis too: 'window: 64')");
    for (const auto& kv : node["matrix"]) {
      Axis axis{kv.first.as<std::string>(), {}, child(mw, kv.first.as<std::string>(), kv.second)};
      // A list of values; `batch` is a list of batches. A scalar is a single value.
      const bool listed = kv.second.IsSequence() && !(axis.key == "batch" && kv.second.size() > 0 &&
                                                      kv.second[0].IsScalar());
      if (listed) {
        for (const auto& v : kv.second) axis.values.push_back(v);
      } else {
        axis.values.push_back(kv.second);
      }
      if (axis.values.empty()) fail(axis.where, "an axis needs at least one value");
      axes.push_back(axis);
    }
  }
  return axes;
}

// The matrix's size, counted before it is built (saturating: 6 axes of 100 values is 10^12).
void check_matrix_size(const std::vector<Axis>& axes, const YAML::Node& node, const Where& w, std::int64_t max_scenarios,
                       std::int64_t earlier_sweeps) {
  {
    const std::int64_t room = std::max<std::int64_t>(0, max_scenarios - earlier_sweeps);
    std::int64_t count = 1;
    std::string product;
    for (const Axis& a : axes) {
      const auto n = static_cast<std::int64_t>(a.values.size());
      count = count > room / n ? room + 1 : count * n;
      product += (product.empty() ? "" : " x ") + a.key + " " + std::to_string(n);
    }
    const std::int64_t included = node["include"] && node["include"].IsSequence() ? node["include"].size() : 0;
    if (count + included > room)
      fail(w, "expands to " + (count > room ? "more than " + std::to_string(room) : std::to_string(count + included)) +
                  " scenarios (matrix: " + (product.empty() ? "none" : product) +
                  (included ? ", plus " + std::to_string(included) + " included" : "") + ")" +
                  (earlier_sweeps ? " after " + std::to_string(earlier_sweeps) + " in the sweeps before it" : "") +
                  ", over the limit of " + std::to_string(max_scenarios) + "; narrow it or raise --max-scenarios");
  }
}

// Every combination of the axes' values over the defaults; none when the sweep has include: alone.
std::vector<Draft> matrix_combos(const std::vector<Axis>& axes, const Draft& defaults, const YAML::Node& node) {
  std::vector<Draft> combos;
  if (!axes.empty() || !node["include"]) {
    std::vector<std::size_t> pick(axes.size(), 0);
    while (true) {
      Draft d = defaults;
      for (std::size_t a = 0; a < axes.size(); ++a) {
        const YAML::Node& v = axes[a].values[pick[a]];
        apply(d, {axes[a].where.path, axes[a].where.key, v.Mark()}, axes[a].key, v);
      }
      combos.push_back(d);
      std::size_t a = axes.size();
      while (a > 0 && ++pick[a - 1] == axes[a - 1].values.size()) pick[--a] = 0;
      if (a == 0) break;
    }
  }
  return combos;
}

void apply_excludes(std::vector<Draft>& combos, const Draft& defaults, const YAML::Node& node, const Where& w) {
  if (node["exclude"]) {
    const Where ew = child(w, "exclude", node["exclude"]);
    if (!node["exclude"].IsSequence()) fail(ew, "expected a list of partial parameter maps");
    for (const auto& entry : node["exclude"]) {
      Draft probe = defaults;
      apply_map(probe, child(w, "exclude", entry), entry);  // validates keys and values
      std::erase_if(combos, [&](const Draft& c) { return matches(c, ew, entry); });
    }
    if (combos.empty() && !node["include"]) fail(ew, "removes every scenario of the matrix; this sweep would run nothing");
  }
}

Sweep expand_sweep(const std::string& name, const YAML::Node& node, const Where& w, std::int64_t memory_limit,
                   std::int64_t max_scenarios, std::int64_t earlier_sweeps) {
  require_keys(w, node, {"description", "api", "matrix", "exclude", "include", "defaults", "edges", "duts",
                         "tolerance", "tolerance_profile", "atb_features", "perf", "cache_check"});
  const SweepSettings settings = read_settings(node, w, memory_limit);
  Draft defaults;
  defaults.s.sweep = name;
  defaults.batch.lengths = {64};
  if (node["defaults"]) apply_map(defaults, child(w, "defaults", node["defaults"]), node["defaults"]);
  const std::vector<Axis> axes = read_axes(node, w);
  check_matrix_size(axes, node, w, max_scenarios, earlier_sweeps);
  std::vector<Draft> combos = matrix_combos(axes, defaults, node);
  apply_excludes(combos, defaults, node, w);
  if (node["edges"]) {
    bool edges = false;
    if (!YAML::convert<bool>::decode(node["edges"], edges)) fail(child(w, "edges", node["edges"]), "expected true or false");
    if (edges) {
      auto extra = edge_cases(combos);
      combos.insert(combos.end(), extra.begin(), extra.end());
    }
  }
  if (node["include"]) {
    const Where iw = child(w, "include", node["include"]);
    if (!node["include"].IsSequence()) fail(iw, "expected a list of parameter maps");
    for (const auto& entry : node["include"]) {
      Draft d = defaults;
      apply_map(d, child(w, "include", entry), entry);
      combos.push_back(d);
    }
  }

  Sweep sweep{name, {}};
  std::set<std::string> ids;
  for (Draft& d : combos) {
    Scenario s = finalize(std::move(d), settings, w);
    if (ids.insert(s.id()).second) sweep.scenarios.push_back(std::move(s));
  }
  return sweep;
}

}  // namespace

SweepFile load_sweep_file(const std::string& path, const SweepLoadOptions& options) {
  SweepFile file;
  file.path = path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))  // a FIFO or a device would be read forever
    throw SweepError(path + ": " + (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  if (const auto bytes = std::filesystem::file_size(path, ec); !ec && bytes > kMaxSweepFileBytes)
    throw SweepError(path + ": the sweep file is " + std::to_string(bytes) + " bytes; files over " +
                     std::to_string(kMaxSweepFileBytes >> 20) + " MiB are refused");
  try {  // checked again on the descriptor it reads: a name swapped for a FIFO since is refused, not waited on
    file.text = read_small_file(path, kMaxSweepFileBytes);
  } catch (const std::runtime_error& e) {
    throw SweepError(e.what());
  }
  if (const auto bad = first_non_utf8(file.text))
    throw SweepError(path + ":" + std::to_string(bad->first) + ":" + std::to_string(bad->second) +
                     ": not UTF-8 text (sweep files are UTF-8; names and IDs are stored as UTF-8)");
  YAML::Node root;
  try {
    root = YAML::Load(file.text);
  } catch (const YAML::Exception& e) {
    throw SweepError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": YAML syntax error: " + e.msg);
  }
  const Where top{&file.path, "(top level)", root.Mark()};
  check_keys({&file.path, "", root.Mark()}, root);
  if (!root.IsMap()) fail(top, "expected a mapping with a 'sweeps' key");
  require_keys(top, root, {"sweeps"});
  if (!root["sweeps"] || !root["sweeps"].IsMap() || root["sweeps"].size() == 0)
    fail(top, "expected 'sweeps:' with at least one named sweep");
  const std::int64_t limit = options.memory_limit_bytes > 0 ? options.memory_limit_bytes : default_memory_limit_bytes();
  std::int64_t total = 0;
  for (const auto& kv : root["sweeps"]) {
    const std::string name = kv.first.as<std::string>();
    const Where w{&file.path, "sweeps." + name, kv.first.Mark()};
    file.sweeps.push_back(expand_sweep(name, kv.second, w, limit, options.max_scenarios, total));
    total += static_cast<std::int64_t>(file.sweeps.back().scenarios.size());
  }
  return file;
}

std::vector<Scenario> select_scenarios(const SweepFile& file, const std::optional<std::string>& sweep,
                                       const std::optional<std::string>& filter, Shard shard) {
  std::vector<Scenario> all;
  std::set<std::string> ids;
  bool found = !sweep;
  for (const Sweep& s : file.sweeps) {
    if (sweep && s.name != *sweep) continue;
    found = true;
    for (const Scenario& sc : s.scenarios)
      if (ids.insert(sc.id()).second) all.push_back(sc);
  }
  if (!found) {
    std::vector<std::string> names;
    for (const Sweep& s : file.sweeps) names.push_back(s.name);
    throw SweepError(file.path + ": no sweep named '" + *sweep + "' (the file has " + join(names, "|") + ")");
  }
  if (filter) {
    const bool exact = ids.count(*filter) > 0;
    std::optional<IdPattern> re;
    if (!exact) try {
        re.emplace(*filter);
      } catch (const std::invalid_argument& e) {
        throw SweepError("--filter: '" + *filter + "' is neither a scenario ID nor a valid regular expression (RE2 syntax: " +
                         e.what() + ")");
      }
    std::erase_if(all, [&](const Scenario& s) { return exact ? s.id() != *filter : !re->found_in(s.id()); });
  }
  std::vector<Scenario> sharded;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (static_cast<int>(i % shard.count) == shard.index) sharded.push_back(std::move(all[i]));
  return sharded;
}

}  // namespace swa::harness
