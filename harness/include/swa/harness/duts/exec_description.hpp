#pragma once
// What an exec: DUT says it runs, asked once per command and process before its first case (the
// process protocol's describe request, dut/external/EXEC_PROTOCOL.md): the exec counterpart of a
// plugin's swa_dut_v2_describe. A case outside it is a skip naming why, without a process.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "swa/params.hpp"
#include "swa/platform/child_process.hpp"

namespace swa::harness {

struct ExecDescription {
  bool described = false;  // false: the DUT did not answer the describe request (it runs everything)
  std::string problem;     // the answer broke the protocol: every case is an error row saying so
  std::string name;        // the console's name for it (empty: none given)
  std::vector<RunMode> modes;
  std::vector<DType> dtypes;
  std::vector<CachePolicy> cache_policies;
  std::vector<KvFormat> kv_formats;
  std::vector<MaskFormat> mask_formats;
  std::vector<int> head_sizes;
  std::vector<std::string> features;  // of sinks, softcap, two-sided
  bool cache_per_call = false;        // it returns the cache after every call (/caches/C)
};

// Runs `COMMAND REQUEST RESPONSE` through /bin/sh in its own process group (and scope), at most
// `timeout_seconds`; `output` keeps the last 64 KiB of its stdout and stderr. Throws when it
// cannot start.
platform::Ending run_exec_command(const std::string& command, const std::filesystem::path& request,
                                  const std::filesystem::path& response, double timeout_seconds, std::string& output);

// Why the description leaves the case out ("it describes modes prefill, decode"), or nothing.
std::string outside_description(const ExecDescription& d, const AttnParams& p);

// The command's description: asked at the first call for each command in this process (a describe
// request, bounded by 30 s or `timeout_seconds` when shorter), remembered after.
const ExecDescription& exec_description(const std::string& command, double timeout_seconds);

}  // namespace swa::harness
