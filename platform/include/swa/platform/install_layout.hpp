// Where an installed copy finds its helpers and data. `cmake --install` and the Python wheel lay files
// out under one root: bin/swa-harness, libexec/swa-harness/ (the plugin worker, the HDF5 probe, the
// python: DUT), share/swa-harness/ (the report generator, swa-bench's torch scripts). The build tree
// keeps the paths it compiled in. A copy knows it is installed by where the file holding this code
// (the executable, or the Python module _core) was loaded from:
//   ROOT/bin/swa-harness                               cmake --install's prefix; the wheel's package folder
//   ROOT/swa_harness/_core*.so                         the wheel: ROOT/swa_harness is the root
//   ROOT/lib/python3*/{dist,site}-packages/swa_harness/_core*.so     cmake --install's Python package
#pragma once

#include <string>
#include <string_view>

namespace swa::platform {

// The folders under an installed root (harness/CMakeLists.txt installs into the same ones).
inline constexpr std::string_view kInstalledLibexec = "libexec/swa-harness";
inline constexpr std::string_view kInstalledShare = "share/swa-harness";

// ROOT/`relative` when this code runs from an installed copy and that file exists there; otherwise
// `built`, the build tree's path compiled in.
std::string installed_or_built(std::string_view relative, std::string_view built);

}  // namespace swa::platform
