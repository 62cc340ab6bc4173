#include "swa/harness/duts/exec_description.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "swa/dut/dut.hpp"
#include "swa/enum_names.hpp"
#include "swa/harness/base/h5.hpp"
#include "swa/harness/base/h5_probe.hpp"
#include "swa/harness/base/interrupt.hpp"
#include "swa/platform/process_scope.hpp"

namespace fs = std::filesystem;

namespace swa::harness {

platform::Ending run_exec_command(const std::string& command, const fs::path& request, const fs::path& response,
                                  double timeout_seconds, std::string& output) {
  platform::ChildSpec spec;
  spec.argv = {"/bin/sh", "-c", command + " \"$1\" \"$2\"", "swa-exec", request.string(), response.string()};
  spec.die_with_parent = true;  // a harness killed outright takes the command with it (this thread waits for it)
  platform::Child child = platform::Child::start(std::move(spec));
  const TrackedProcessGroup group(child.pid());  // an interrupt ends it too
  const platform::Ending ending = child.wait(timeout_seconds);
  output = child.output();
  return ending;
}

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Attribute `key`, a comma list of names parse() takes; absent: every value. Throws naming the bad one.
template <typename E, std::size_t N, typename Parse, typename NameOf>
std::vector<E> read_names(const std::map<std::string, h5::AttrValue>& attrs, const char* key, const E (&all)[N],
                          Parse parse, NameOf name_of) {
  const auto it = attrs.find(key);
  if (it == attrs.end()) return {std::begin(all), std::end(all)};
  const auto* text = std::get_if<std::string>(&it->second);
  if (!text) throw std::runtime_error(std::string("attribute ") + key + " must be a string");
  std::vector<E> out;
  for (const std::string& name : split_list(*text)) {
    const auto value = parse(name);
    if (!value)
      throw std::runtime_error(std::string("attribute ") + key + ": '" + name.substr(0, 40) + "' is not one of " +
                               enum_choices(all, name_of));
    out.push_back(*value);
  }
  return out;
}

ExecDescription parse_description(const fs::path& response) {
  ExecDescription d;
  const h5::Handle f = h5::open_file_readonly(response);
  const auto attrs = h5::read_attrs(f.id());
  if (attrs.count("error")) return d;  // it does not describe itself
  d.described = true;
  try {
    if (const auto it = attrs.find("name"); it != attrs.end()) {
      const auto* name = std::get_if<std::string>(&it->second);
      if (name && dut::is_short_name(*name)) d.name = *name;
    }
    d.modes = read_names(attrs, "modes", kAllRunModes, parse_mode, mode_name);
    d.dtypes = read_names(attrs, "dtypes", kAllDTypes, parse_dtype, dtype_name);
    d.cache_policies = read_names(attrs, "cache_policies", kAllCachePolicies, parse_cache, cache_name);
    d.kv_formats = read_names(attrs, "kv_formats", kAllKvFormats, parse_kv_format, kv_format_name);
    d.mask_formats = read_names(attrs, "mask_formats", kAllMaskFormats, parse_mask_format, mask_format_name);
    static constexpr std::string_view kFeatures[] = {"sinks", "softcap", "two-sided"};
    if (const auto it = attrs.find("features"); it != attrs.end()) {
      const auto* text = std::get_if<std::string>(&it->second);
      if (!text) throw std::runtime_error("attribute features must be a string");
      for (const std::string& name : split_list(*text)) {
        if (std::find(std::begin(kFeatures), std::end(kFeatures), name) == std::end(kFeatures))
          throw std::runtime_error("attribute features: '" + name.substr(0, 40) + "' is not one of sinks|softcap|two-sided");
        d.features.push_back(name);
      }
    } else {
      d.features.assign(std::begin(kFeatures), std::end(kFeatures));
    }
    if (const auto it = attrs.find("head_sizes"); it != attrs.end()) {
      const auto* text = std::get_if<std::string>(&it->second);
      if (!text) throw std::runtime_error("attribute head_sizes must be a string of comma-separated integers");
      for (const std::string& n : split_list(*text)) {
        if (n.size() > 5 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1)
          throw std::runtime_error("attribute head_sizes: '" + n.substr(0, 40) + "' is not a head size (1..99999)");
        d.head_sizes.push_back(std::stoi(n));
      }
    }
    if (const auto it = attrs.find("cache_per_call"); it != attrs.end()) {
      const auto* flag = std::get_if<std::int64_t>(&it->second);
      if (!flag || (*flag != 0 && *flag != 1)) throw std::runtime_error("attribute cache_per_call must be the integer 0 or 1");
      d.cache_per_call = *flag == 1;
    }
  } catch (const std::exception& e) {
    d.problem = std::string("the answer to the describe request is refused: ") + e.what();
  }
  return d;
}

// The describe request: a file with attribute request = "describe", named describe.h5.
ExecDescription describe(const std::string& command, double timeout_seconds) {
  const ScratchFolder scratch("swa-exec-describe." + platform::owner_tag());  // named as exec_dut.cpp's
  const fs::path& dir = scratch.path();
  const fs::path request = dir / "describe.h5", response = dir / "response.h5";
  {
    const h5::Handle f = h5::create_file(request);
    h5::write_attr(f.id(), "request", std::string("describe"));
  }
  std::string output;
  try {
    // Bounded apart from the cases: a DUT that does not know the request must not stall the run long.
    if (!run_exec_command(command, request, response, std::min(timeout_seconds, 30.0), output).ok()) return {};
  } catch (const std::exception&) {
    return {};
  }
  const fs::file_status status = fs::symlink_status(response);
  constexpr std::uintmax_t kMost = 1 << 20;
  if (status.type() != fs::file_type::regular || fs::file_size(response) > kMost) return {};
  if (!h5::probe_in_child(response, kMost, 10.0).empty()) return {};
  try {
    return parse_description(response);
  } catch (const std::exception&) {
    return {};
  }
}

template <typename E, typename NameOf>
std::string outside(const char* what, const std::vector<E>& allowed, E value, NameOf name_of) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return {};
  std::string list;
  for (E e : allowed) list += (list.empty() ? "" : ", ") + std::string(name_of(e));
  return std::string("it describes ") + what + " " + (list.empty() ? "none" : list) + ", not " +
         std::string(name_of(value));
}

}  // namespace

std::string outside_description(const ExecDescription& d, const AttnParams& p) {
  if (!d.described || !d.problem.empty()) return {};
  if (auto why = outside("modes", d.modes, p.mode, mode_name); !why.empty()) return why;
  if (auto why = outside("dtypes", d.dtypes, p.dtype, dtype_name); !why.empty()) return why;
  if (p.mode != RunMode::prefill)
    if (auto why = outside("cache policies", d.cache_policies, p.cache, cache_name); !why.empty()) return why;
  if (auto why = outside("KV formats", d.kv_formats, p.kv_format, kv_format_name); !why.empty()) return why;
  if (auto why = outside("mask formats", d.mask_formats, p.mask_format, mask_format_name); !why.empty()) return why;
  if (!d.head_sizes.empty() && std::find(d.head_sizes.begin(), d.head_sizes.end(), p.head_size) == d.head_sizes.end())
    return "it describes other head sizes, not " + std::to_string(p.head_size);
  auto needs = [&](const char* feature) {
    return std::find(d.features.begin(), d.features.end(), feature) == d.features.end();
  };
  if (p.sinks && needs("sinks")) return "it does not describe sinks";
  if (p.softcap > 0.f && needs("softcap")) return "it does not describe softcap";
  if (p.band.right != 0 && needs("two-sided")) return "it does not describe two-sided windows";
  return {};
}

const ExecDescription& exec_description(const std::string& command, double timeout_seconds) {
  static std::mutex mutex;
  static std::map<std::string, ExecDescription> known;
  std::lock_guard lock(mutex);  // one describe per command, the other jobs waiting for it
  const auto it = known.find(command);
  if (it != known.end()) return it->second;
  return known.emplace(command, describe(command, timeout_seconds)).first->second;
}

}  // namespace swa::harness
