#pragma once
// What this machine is, for the files that record where they were made.
#include <string>

namespace swa::harness {

// This machine's CPU model name from /proc/cpuinfo ("unknown" without one): /meta's cpu, and part of
// a golden cache entry's key (fp64 results can differ between CPUs' libm).
std::string cpu_model();

}  // namespace swa::harness
