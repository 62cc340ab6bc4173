// The CPU DUT behind the C ABI (swa/dut_v2.h): proves the ABI carries everything the scenarios need.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "abi_convert.hpp"
#include "swa/dut/cpu_dut.hpp"

namespace {

swa::dut::Dut& cpu() {
  static auto dut = swa::dut::make_cpu_dut();
  return *dut;
}

int report(const swa::dut::Status& s, swa_dut_v2_status* status) {
  if (s.ok) return 0;
  status->code = 1;
  std::snprintf(status->message, sizeof status->message, "%s", s.message.c_str());
  return 1;
}

template <class F>
int guarded(swa_dut_v2_status* error, F&& f) {
  try {
    return report(f(), error);
  } catch (const std::exception& e) {
    return report(swa::dut::Status::failure(e.what()), error);
  }
}

}  // namespace

extern "C" {

uint32_t swa_dut_v2_abi_version(void) { return SWA_DUT_V2_ABI_VERSION; }

int swa_dut_v2_describe(swa_dut_v2_traits* t) {
  const swa::dut::Traits traits = cpu().traits();
  t->params_size = sizeof(swa_dut_v2_params);
  std::snprintf(t->name, sizeof t->name, "cpu-plugin");
  t->query_tile = traits.query_tile;
  t->key_tile = traits.key_tile;
  t->head_size_count = static_cast<int32_t>(std::min<std::size_t>(traits.head_sizes.size(), 16));
  for (int i = 0; i < t->head_size_count; ++i) t->head_sizes[i] = traits.head_sizes[i];
  return 0;
}

int swa_dut_v2_supports(const swa_dut_v2_params* p, swa_dut_v2_status* status) {
  const swa::dut::Support s = cpu().supports(swa::dut::abi::from_c(*p));
  if (!s.run) std::snprintf(status->message, sizeof status->message, "%s", s.skip_reason.c_str());
  return s.run ? 1 : 0;
}

int swa_dut_v2_prefill(const swa_dut_v2_params* p, swa_dut_v2_status* status) {
  return guarded(status, [&] { return cpu().prefill(swa::dut::abi::from_c(*p)); });
}

int swa_dut_v2_chunked_prefill(const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int chunk_index,
                               swa_dut_v2_status* status) {
  return guarded(status, [&] {
    swa::dut::KvCache k = swa::dut::abi::copy_from_c(*cache);
    const swa::dut::Status s = cpu().chunked_prefill(swa::dut::abi::from_c(*p), k, chunk_index);
    swa::dut::abi::copy_back_to_c(k, *cache);
    return s;
  });
}

int swa_dut_v2_decode_step(const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int step, swa_dut_v2_status* status) {
  return guarded(status, [&] {
    swa::dut::KvCache k = swa::dut::abi::copy_from_c(*cache);
    const swa::dut::Status s = cpu().decode_step(swa::dut::abi::from_c(*p), k, step);
    swa::dut::abi::copy_back_to_c(k, *cache);
    return s;
  });
}

}  // extern "C"
