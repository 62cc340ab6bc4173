// The CPU DUT behind the C ABI (swa/dut_v1.h): proves the ABI carries everything the scenarios need.
#include <cstring>
#include <exception>

#include "abi_convert.hpp"
#include "cpu_dut.hpp"

namespace {

swa::dut::Dut& cpu() {
  static auto dut = swa::dut::make_cpu_dut();
  return *dut;
}

int report(const swa::dut::Status& s, swa_dut_v1_error* error) {
  if (s.ok) return 0;
  error->code = 1;
  std::strncpy(error->message, s.message.c_str(), sizeof error->message - 1);
  return 1;
}

template <class F>
int guarded(swa_dut_v1_error* error, F&& f) {
  try {
    return report(f(), error);
  } catch (const std::exception& e) {
    return report(swa::dut::Status::failure(e.what()), error);
  }
}

}  // namespace

extern "C" {

uint32_t swa_dut_v1_abi_version(void) { return SWA_DUT_V1_ABI_VERSION; }
const char* swa_dut_v1_name(void) { return "cpu-plugin"; }

int swa_dut_v1_supports(const swa_dut_v1_params* p, char* reason, size_t reason_len) {
  const swa::dut::Support s = cpu().supports(swa::dut::abi::from_c(*p));
  if (!s.run && reason_len > 0) {
    std::strncpy(reason, s.skip_reason.c_str(), reason_len - 1);
    reason[reason_len - 1] = '\0';
  }
  return s.run ? 1 : 0;
}

int swa_dut_v1_prefill(const swa_dut_v1_params* p, swa_dut_v1_error* error) {
  return guarded(error, [&] { return cpu().prefill(swa::dut::abi::from_c(*p)); });
}

int swa_dut_v1_chunked_prefill(const swa_dut_v1_params* p, swa_dut_v1_cache* cache, int chunk_index,
                               swa_dut_v1_error* error) {
  return guarded(error, [&] {
    swa::dut::KvCache k = swa::dut::abi::copy_from_c(*cache);
    const swa::dut::Status s = cpu().chunked_prefill(swa::dut::abi::from_c(*p), k, chunk_index);
    swa::dut::abi::copy_back_to_c(k, *cache);
    return s;
  });
}

int swa_dut_v1_decode_step(const swa_dut_v1_params* p, swa_dut_v1_cache* cache, int step, swa_dut_v1_error* error) {
  return guarded(error, [&] {
    swa::dut::KvCache k = swa::dut::abi::copy_from_c(*cache);
    const swa::dut::Status s = cpu().decode_step(swa::dut::abi::from_c(*p), k, step);
    swa::dut::abi::copy_back_to_c(k, *cache);
    return s;
  });
}

}  // extern "C"
