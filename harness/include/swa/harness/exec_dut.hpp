#pragma once
// A DUT that is another process, spoken to through HDF5 request and response files (the process
// protocol, harness/README.md): `--dut exec:'COMMAND ...'` runs `COMMAND ... REQUEST.h5 RESPONSE.h5`.
#include <memory>
#include <string>

#include "swa/dut/dut.hpp"

namespace swa::harness {

// 2: the response carries the KV cache (/cache). 3: the request adds attribute softcap and dataset
// /sinks; sent only for cases that use them, so a DUT that speaks 2 keeps running every other case.
// 4: the request adds attributes kv_format, k_descale and v_descale, and /cache holds FP8 codes;
// sent only for FP8 KV cases. 5: the request adds attributes page_size, pool_pages, table_width and
// dataset /page_tables (the page table each call sees), and /cache/k and /cache/v are the page pool;
// sent only for paged KV cases.
inline constexpr int kExecProtocolVersion = 5;
inline constexpr int kExecProtocolVersionWithFp8Kv = 4;
inline constexpr int kExecProtocolVersionWithScoreSemantics = 3;
inline constexpr int kExecProtocolVersionWithoutScoreSemantics = 2;

std::unique_ptr<dut::Dut> make_exec_dut(const std::string& command, double timeout_seconds);

}  // namespace swa::harness
