#include "python_fields.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include <pybind11/stl.h>

#include "abi_convert.hpp"
#include "swa/kernel_fields.hpp"
#include "swa/kv_format.hpp"

namespace py = pybind11;

namespace swa::dut::python {
namespace {

template <typename T>
py::object field_value(T value) {
  if constexpr (std::is_pointer_v<T>)
    return py::int_(reinterpret_cast<std::uintptr_t>(value));
  else
    return py::cast(value);
}

template <typename E, std::size_t N, typename NameOf>
std::vector<std::string> names(const E (&all)[N], NameOf name_of) {
  std::vector<std::string> out;
  for (E e : all) out.emplace_back(name_of(e));
  return out;
}

}  // namespace

py::dict params_fields(const swa_dut_v2_params& c) {
  py::dict d;
#define SWA_PY_FIELD(field, member, minor, exec) d[#field] = field_value(c.field);
  SWA_KERNEL_FIELDS(SWA_PY_FIELD)
#undef SWA_PY_FIELD
  const swa::AttnParams p = swa::dut::abi::from_c(c);
  d["dtype"] = std::string(swa::dtype_name(p.dtype));
  d["mode"] = std::string(swa::mode_name(p.mode));
  d["cache_policy"] = std::string(swa::cache_name(p.cache));
  d["mask_format"] = std::string(swa::mask_format_name(p.mask_format));
  d["kv_format"] = std::string(swa::kv_format_name(p.kv_format));
  return d;
}

py::dict cache_fields(const swa_dut_v2_cache& c) {
  py::dict d;
  d["policy"] = std::string(swa::cache_name(static_cast<swa::CachePolicy>(c.policy)));
  d["dtype"] = std::string(swa::dtype_name(static_cast<swa::DType>(c.dtype)));
  d["kv_format"] = std::string(swa::kv_format_name(static_cast<swa::KvFormat>(c.kv_format)));
  for (auto [name, value] : {std::pair{"batch", c.batch}, {"heads_kv", c.heads_kv}, {"head_size", c.head_size},
                             {"page_size", c.page_size}})
    d[name] = value;
  d["slots"] = c.slots;
  d["pages"] = c.pages;
  d["table_width"] = c.table_width;
  for (auto [name, address] : {std::pair{"k", static_cast<void*>(c.k)}, {"v", c.v}, {"base", c.base},
                               {"tokens_written", c.tokens_written}, {"page_table", c.page_table}})
    d[name] = field_value(address);
  return d;
}

py::dict describe_choices() {
  py::dict choices;
  choices["dtypes"] = names(kAllDTypes, dtype_name);
  choices["modes"] = names(kAllRunModes, mode_name);
  choices["cache_policies"] = names(kAllCachePolicies, cache_name);
  choices["kv_formats"] = names(kAllKvFormats, kv_format_name);
  choices["mask_formats"] = names(kAllMaskFormats, mask_format_name);
  return choices;
}

swa_dut_v2_traits traits_from_description(const py::dict& d) {
  swa_dut_v2_traits t{};
  t.struct_size = sizeof t;
  auto bits = [&](const char* key, auto parse) {
    uint32_t mask = 0;
    if (d.contains(key))
      for (const std::string& name : d[key].cast<std::vector<std::string>>())
        if (const auto value = parse(name)) mask |= 1u << static_cast<int>(*value);
    return d.contains(key) && mask == 0 ? ~0u << 8 : mask;  // an empty list runs nothing (no bit 0..7 set)
  };
  t.params_size = sizeof(swa_dut_v2_params);
  std::snprintf(t.name, sizeof t.name, "%s", d["name"].cast<std::string>().c_str());
  t.dtypes = bits("dtypes", parse_dtype);
  t.modes = bits("modes", parse_mode);
  t.cache_policies = bits("cache_policies", parse_cache);
  t.mask_formats = bits("mask_formats", parse_mask_format);
  if (d.contains("head_sizes")) {
    const auto sizes = d["head_sizes"].cast<std::vector<int>>();
    for (std::size_t i = 0; i < sizes.size() && i < 16; ++i) t.head_sizes[i] = sizes[i];
    t.head_size_count = static_cast<int32_t>(std::min<std::size_t>(sizes.size(), 16));
  }
  if (d.contains("query_tile")) t.query_tile = d["query_tile"].cast<int32_t>();
  if (d.contains("key_tile")) t.key_tile = d["key_tile"].cast<int32_t>();
  if (d.contains("cache_private")) t.cache_private = d["cache_private"].cast<bool>();
  t.times_own_kernels = 1;
  return t;
}

}  // namespace swa::dut::python
