#include "swa/harness/judge/results.hpp"

#include <cctype>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "swa/dut/dut.hpp"
#include "swa/enum_names.hpp"

namespace swa::harness {

namespace {

// The name without its console label (LABEL=NAME, dut_registry.hpp's split_dut_label).
std::string_view without_console_label(std::string_view name) {
  const auto eq = name.find('=');
  if (eq != std::string_view::npos && dut::is_short_name(name.substr(0, eq))) return name.substr(eq + 1);
  return name;
}

// A path's final component ("a/b/" gives "b"; "/" stays "/").
std::string_view file_name_of(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos || path.size() == 1 ? path : path.substr(slash + 1);
}

bool is_identifier(std::string_view s) {  // Python's, with any non-ASCII byte allowed
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (const char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80))
      return false;
  return true;
}

// FUNCTION[:key=value...]
bool is_function_and_items(std::string_view rest) {
  for (std::size_t start = 0, part = 0;; ++part) {
    const auto colon = rest.find(':', start);
    const std::string_view item = rest.substr(start, colon == std::string_view::npos ? colon : colon - start);
    if (part == 0 ? !is_identifier(item) : item.find('=') == std::string_view::npos) return false;
    if (colon == std::string_view::npos) return true;
    start = colon + 1;
  }
}

// TARGET and FUNCTION[:key=value...] of a python: spec, without the file system: a TARGET ending in
// .py is the longest prefix ending in ".py" followed by ':' whose rest reads as FUNCTION[:key=value...]
// (so a path holding ':' stays whole); else TARGET ends at the first ':' (dut/python/README.md).
std::pair<std::string_view, std::string_view> split_python_spec(std::string_view spec) {
  constexpr auto npos = std::string_view::npos;
  for (auto pos = spec.rfind(".py:"); pos != npos; pos = pos == 0 ? npos : spec.rfind(".py:", pos - 1))
    if (is_function_and_items(spec.substr(pos + 4))) return {spec.substr(0, pos + 3), spec.substr(pos + 4)};
  const auto colon = spec.find(':');
  if (colon == npos) return {spec, {}};
  return {spec.substr(0, colon), spec.substr(colon + 1)};
}

bool is_python_file_target(std::string_view target) {
  return target.find('/') != std::string_view::npos ||
         (target.size() >= 3 && target.substr(target.size() - 3) == ".py");
}

// The words of a shell command as /bin/sh splits them (quotes and backslashes removed; no
// expansion): what the exec: DUT's command runs.
std::vector<std::string> shell_words(std::string_view command) {
  std::vector<std::string> words;
  std::optional<std::string> word;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (word) words.push_back(std::move(*word));
      word.reset();
      continue;
    }
    if (!word) word.emplace();
    if (c == '\\' && i + 1 < command.size()) {
      *word += command[++i];
    } else if (c == '\'') {
      const auto end = command.find('\'', i + 1);
      *word += command.substr(i + 1, (end == std::string_view::npos ? command.size() : end) - i - 1);
      i = end == std::string_view::npos ? command.size() : end;
    } else if (c == '"') {
      for (++i; i < command.size() && command[i] != '"'; ++i) {
        if (command[i] == '\\' && i + 1 < command.size() && std::string_view("\"\\$`").find(command[i + 1]) != std::string_view::npos) ++i;
        *word += command[i];
      }
    } else {
      *word += c;
    }
  }
  if (word) words.push_back(std::move(*word));
  return words;
}

// A word of an exec: command with its path by the path's final component: "/a/dut.py" gives
// "dut.py", "--lib=/a/b.so" gives "--lib=b.so".
std::string word_label(const std::string& word) {
  const auto slash = word.find('/');
  if (slash == std::string::npos) return word;
  const auto eq = word.find('=');
  const std::size_t start = eq != std::string::npos && eq < slash ? eq + 1 : 0;
  return word.substr(0, start) + std::string(file_name_of(std::string_view(word).substr(start)));
}

std::string canonical(std::string_view path) {
  if (path.empty()) return {};
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(std::string(path), ec);
  if (ec) return std::string(path);
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, ec);
  return (ec ? absolute.lexically_normal() : resolved).string();
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

std::string dut_label(const std::string& dut) {
  const std::string_view name = without_console_label(dut);
  if (starts_with(name, "plugin:")) return "plugin:" + std::string(file_name_of(name.substr(7)));
  if (starts_with(name, "python:")) {
    const auto [target, rest] = split_python_spec(name.substr(7));
    std::string label = "python:" + std::string(is_python_file_target(target) ? file_name_of(target) : target);
    if (!rest.empty()) label += ":" + std::string(rest);
    return label;
  }
  if (starts_with(name, "exec:")) {
    std::string label = "exec:";
    const std::vector<std::string> words = shell_words(name.substr(5));
    for (std::size_t i = 0; i < words.size(); ++i) label += (i ? " " : "") + word_label(words[i]);
    return label;
  }
  return std::string(name);
}

std::string dut_path(const std::string& dut) {
  const std::string_view name = without_console_label(dut);
  if (starts_with(name, "plugin:")) return canonical(name.substr(7));
  if (starts_with(name, "python:")) {
    const std::string_view target = split_python_spec(name.substr(7)).first;
    return is_python_file_target(target) ? canonical(target) : std::string();
  }
  if (starts_with(name, "exec:")) {
    const std::vector<std::string> words = shell_words(name.substr(5));
    if (!words.empty() && words[0].find('/') != std::string::npos) return canonical(words[0]);
  }
  return {};
}

std::string dut_from_anywhere(const std::string& dut) {
  const std::string_view name = without_console_label(dut);
  const std::string label(std::string_view(dut).substr(0, dut.size() - name.size()));
  auto absolute = [](std::string_view path) {
    std::error_code ec;
    const std::filesystem::path a = std::filesystem::absolute(std::string(path), ec);
    return ec ? std::string(path) : a.lexically_normal().string();
  };
  if (starts_with(name, "plugin:") && name.size() > 7) return label + "plugin:" + absolute(name.substr(7));
  if (starts_with(name, "python:")) {
    const auto [target, rest] = split_python_spec(name.substr(7));
    if (!target.empty() && is_python_file_target(target))
      return label + "python:" + absolute(target) + (rest.empty() ? "" : ":" + std::string(rest));
  }
  return dut;
}

ScenarioRow scenario_row(const Scenario& s, const AttnParams* params) {
  ScenarioRow r;
  if (params) {
    r.k_descale = params->k_descale;
    r.v_descale = params->v_descale;
    r.pool_pages = params->pool_pages;
  }
  r.id = s.id();
  r.sweep = s.sweep;
  r.params = case_columns(s);
  r.batch = static_cast<std::int64_t>(s.prompt_lens.size());
  r.tokens = s.tokens();
  return r;
}

ResultRow result_row(const std::string& scenario_id, const std::string& dut, DType dtype, RunMode mode,
                     const Tolerance& tolerance) {
  ResultRow r;
  r.scenario_id = scenario_id;
  r.dut = dut;
  r.dut_label = dut_label(dut);
  r.dut_path = dut_path(dut);
  r.dtype = dtype_name(dtype);
  r.mode = mode_name(mode);
  r.profile = profile_name(tolerance.profile);
  r.rtol_factor = tolerance.rtol_factor;
  r.atol_floor = tolerance.atol_floor;
  return r;
}

}  // namespace swa::harness
