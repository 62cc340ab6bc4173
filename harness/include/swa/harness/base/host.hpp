#pragma once
// What this machine is, for the files that record where they were made.
#include <string>

namespace swa::harness {

// This machine's CPU model name from /proc/cpuinfo ("unknown" without one): /meta's cpu, and part of
// a golden cache entry's key (fp64 results can differ between CPUs' libm).
std::string cpu_model();

// The word that runs this program again from any folder, for the commands it prints: its name when
// the PATH's first program of that name is this very file (an installed swa-harness), else its
// absolute path ("/home/me/swa/build/harness/swa-harness"). Started through the Python package's
// console script (SWA_HARNESS_LAUNCHER, SWA_HARNESS_LAUNCHED: harness/src/base/host.cpp), that script
// counts as this program. `name` is the installed name.
std::string command_word(const std::string& name);

}  // namespace swa::harness
