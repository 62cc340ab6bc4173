#include "plugin_abi.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "swa/kernel_fields.hpp"

namespace swa::dut {
namespace {

// The fields every 2.0 plugin knows: a describe() reporting less was built against no 2.x header.
constexpr uint32_t min_params_size = offsetof(swa_dut_v2_params, mask_block) + sizeof(int32_t);

template <class F>
std::string bind(void* handle, const char* symbol, F& out, const char* header) {
  out = reinterpret_cast<F>(dlsym(handle, symbol));
  return out ? std::string()
             : std::string("does not export ") + symbol + " (every function of " + header + " is required)";
}

swa_dut_v1_params to_v1(const swa_dut_v2_params& p) {
  swa_dut_v1_params c{};
  // v1 has 2.0's fields, by the same names.
#define SWA_TO_V1(field, member, minor, exec) c.field = p.field;
  SWA_KERNEL_FIELDS_2_0(SWA_TO_V1)
#undef SWA_TO_V1
  return c;
}

// The v1 cache view shares the v2 cache's arrays, so whatever the plugin writes lands in place.
swa_dut_v1_cache to_v1(const swa_dut_v2_cache& c) {
  swa_dut_v1_cache o{};
  o.policy = c.policy;
  o.dtype = c.dtype;
  o.slots = c.slots;
  o.heads_kv = c.heads_kv;
  o.head_size = c.head_size;
  o.batch = c.batch;
  o.base = c.base;
  o.tokens_written = c.tokens_written;
  o.k = c.k;
  o.v = c.v;
  return o;
}

int from_v1(int rc, const swa_dut_v1_error& e, swa_dut_v2_status& status) {
  status.code = e.code;
  std::snprintf(status.message, sizeof status.message, "%.*s", static_cast<int>(strnlen(e.message, sizeof e.message)),
                e.message);
  return rc;
}

}  // namespace

swa_dut_v2_status fresh_status() {
  swa_dut_v2_status s{};
  s.struct_size = sizeof s;
  s.kernel_ms = -1;
  return s;
}

std::string BoundPlugin::entry_point_name(PluginCall call, uint32_t version) {
  const std::string prefix = version == 1 ? "swa_dut_v1_" : "swa_dut_v2_";
  switch (call) {
    case PluginCall::load: return "dlopen";
    case PluginCall::supports: return prefix + "supports";
    case PluginCall::prefill: return prefix + "prefill";
    case PluginCall::chunked_prefill: return prefix + "chunked_prefill";
    case PluginCall::decode_step: return prefix + "decode_step";
  }
  return "?";
}

std::string BoundPlugin::open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return std::string("cannot be loaded: ") + dlerror();
  std::string error;
  auto* v2_version = reinterpret_cast<uint32_t (*)()>(dlsym(handle, "swa_dut_v2_abi_version"));
  auto* v1_version = reinterpret_cast<uint32_t (*)()>(dlsym(handle, "swa_dut_v1_abi_version"));
  if (v2_version && v2_version() == SWA_DUT_V2_ABI_VERSION) {
    error = bind_v2(handle);
  } else if (!v2_version && v1_version && v1_version() == SWA_DUT_V1_ABI_VERSION) {
    error = bind_v1(handle);
  } else if (v2_version || v1_version) {
    error = "speaks ABI version " + std::to_string(v2_version ? v2_version() : v1_version()) +
            "; this harness speaks 1 (swa/dut_v1.h) and 2 (swa/dut_v2.h)";
  } else {
    error = "does not export swa_dut_v2_abi_version (nor swa_dut_v1_abi_version): not a swa-harness plugin";
  }
  if (!error.empty()) dlclose(handle);
  return error;
}

std::string BoundPlugin::bind_v2(void* handle) {
  const char* header = "swa/dut_v2.h";
  for (std::string e : {bind(handle, "swa_dut_v2_describe", v2_.describe, header),
                        bind(handle, "swa_dut_v2_supports", v2_.supports, header),
                        bind(handle, "swa_dut_v2_prefill", v2_.prefill, header),
                        bind(handle, "swa_dut_v2_chunked_prefill", v2_.chunked_prefill, header),
                        bind(handle, "swa_dut_v2_decode_step", v2_.decode_step, header)})
    if (!e.empty()) return e;
  version_ = 2;
  traits_ = {};
  traits_.struct_size = sizeof traits_;
  if (const int rc = v2_.describe(&traits_); rc != 0) {
    // Not part of swa/dut_v2.h: the plugins built here (libswa_python_dut.so) say why they cannot load.
    using Why = const char* (*)();
    const auto why = reinterpret_cast<Why>(dlsym(handle, "swa_dut_internal_describe_error"));
    const char* text = why ? why() : nullptr;
    return text && *text ? std::string(text) : "failed in swa_dut_v2_describe (returned " + std::to_string(rc) + ")";
  }
  traits_.name[sizeof traits_.name - 1] = '\0';
  if (traits_.params_size < min_params_size)
    return "describes itself with params_size " + std::to_string(traits_.params_size) +
           "; set it to sizeof(swa_dut_v2_params) (at least " + std::to_string(min_params_size) + ")";
  if (traits_.head_size_count < 0 || traits_.head_size_count > 16)
    return "describes itself with head_size_count " + std::to_string(traits_.head_size_count) + "; allowed 0..16";
  return {};
}

std::string BoundPlugin::bind_v1(void* handle) {
  const char* header = "swa/dut_v1.h";
  for (std::string e : {bind(handle, "swa_dut_v1_name", v1_.name, header),
                        bind(handle, "swa_dut_v1_supports", v1_.supports, header),
                        bind(handle, "swa_dut_v1_prefill", v1_.prefill, header),
                        bind(handle, "swa_dut_v1_chunked_prefill", v1_.chunked_prefill, header),
                        bind(handle, "swa_dut_v1_decode_step", v1_.decode_step, header)})
    if (!e.empty()) return e;
  version_ = 1;
  // A version-1 plugin states nothing but its name; it knows every field of the 2.0 params.
  traits_ = {};
  traits_.struct_size = sizeof traits_;
  traits_.params_size = min_params_size;
  const char* name = v1_.name();
  std::snprintf(traits_.name, sizeof traits_.name, "%s", name ? name : "");
  return {};
}

int BoundPlugin::supports(const swa_dut_v2_params& p, swa_dut_v2_status& status) const {
  if (version_ == 2) return v2_.supports(&p, &status);
  const swa_dut_v1_params c = to_v1(p);
  return v1_.supports(&c, status.message, sizeof status.message);
}

int BoundPlugin::prefill(const swa_dut_v2_params& p, swa_dut_v2_status& status) const {
  if (version_ == 2) return v2_.prefill(&p, &status);
  const swa_dut_v1_params c = to_v1(p);
  swa_dut_v1_error e{};
  return from_v1(v1_.prefill(&c, &e), e, status);
}

int BoundPlugin::chunked_prefill(const swa_dut_v2_params& p, swa_dut_v2_cache& cache, int chunk_index,
                                 swa_dut_v2_status& status) const {
  if (version_ == 2) return v2_.chunked_prefill(&p, &cache, chunk_index, &status);
  const swa_dut_v1_params c = to_v1(p);
  swa_dut_v1_cache k = to_v1(cache);
  swa_dut_v1_error e{};
  return from_v1(v1_.chunked_prefill(&c, &k, chunk_index, &e), e, status);
}

int BoundPlugin::decode_step(const swa_dut_v2_params& p, swa_dut_v2_cache& cache, int step,
                             swa_dut_v2_status& status) const {
  if (version_ == 2) return v2_.decode_step(&p, &cache, step, &status);
  const swa_dut_v1_params c = to_v1(p);
  swa_dut_v1_cache k = to_v1(cache);
  swa_dut_v1_error e{};
  return from_v1(v1_.decode_step(&c, &k, step, &e), e, status);
}

}  // namespace swa::dut
