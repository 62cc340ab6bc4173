// How much memory a process holds of its own, for the limits the harness puts on DUT workers.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace swa::platform {

// The process's resident anonymous memory (RssAnon of /proc/PID/status, in bytes): what its heap,
// its arrays and its threads' stacks hold in RAM. Memory it shares through a file or a memfd (the
// harness's tensors) and its mapped libraries are not counted. nullopt when it cannot be read (the
// process is gone, or no /proc).
std::optional<std::int64_t> resident_anonymous_bytes(pid_t pid);

// The machine's physical memory in bytes (sysconf), 0 when unknown.
std::int64_t physical_memory_bytes();

}  // namespace swa::platform
