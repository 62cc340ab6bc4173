#pragma once
// Conversions between the C ABI structs (swa/dut_v2.h) and the C++ params, cache and traits, shared
// by the harness's plugin loaders and the plugins built here.
#include <string>

#include "swa/dut/dut.hpp"
#include "swa/dut/kv_cache.hpp"
#include "swa/dut_v2.h"
#include "swa/params.hpp"

namespace swa::dut::abi {

swa_dut_v2_params to_c(const AttnParams& p);
AttnParams from_c(const swa_dut_v2_params& c);

// A C view of `cache` whose base/tokens_written arrays live in `scratch`; sync_back() copies them back.
// A paged cache's page table is copied too: the harness changes it between calls (refresh_pages).
struct CacheView {
  swa_dut_v2_cache c{};
  std::vector<std::int64_t> base, tokens_written;
  std::vector<std::int32_t> page_table;
  explicit CacheView(KvCache& cache);
  void refresh_pages(const KvCache& cache);
  void sync_back(KvCache& cache) const;
};

// A C++ KvCache holding a copy of a C cache (plugins); copy_back() returns the results.
KvCache copy_from_c(const swa_dut_v2_cache& c);
void copy_back_to_c(const KvCache& cache, swa_dut_v2_cache& c);

// What a plugin states about itself, as the harness's Traits.
Traits to_traits(const swa_dut_v2_traits& t);
// Why a case is outside what the plugin describes itself as running ("" when inside).
std::string outside_traits(const swa_dut_v2_traits& t, const AttnParams& p);

}  // namespace swa::dut::abi
