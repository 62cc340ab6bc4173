#include "swa/platform/install_layout.hpp"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace swa::platform {
namespace {

namespace fs = std::filesystem;

// The file this code was loaded from: the executable (whose link map names it "") or a shared object.
fs::path own_file() {
  Dl_info info{};
  link_map* map = nullptr;
  std::error_code ec;
  if (dladdr1(reinterpret_cast<void*>(&own_file), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) &&
      map && map->l_name && *map->l_name) {
    const fs::path object = fs::canonical(map->l_name, ec);
    if (!ec) return object;
  }
  const fs::path self = fs::canonical("/proc/self/exe", ec);
  return ec ? fs::path() : self;
}

// The roots an installed copy may sit under, nearest first (the layouts in the header).
std::vector<fs::path> installed_roots(const fs::path& file) {
  const fs::path folder = file.parent_path();
  if (folder.empty()) return {};
  std::vector<fs::path> roots;
  if (folder.filename() == "bin") roots.push_back(folder.parent_path());
  if (folder.filename() == "swa_harness") {
    roots.push_back(folder);
    const fs::path packages = folder.parent_path();
    const std::string name = packages.filename().string();
    const fs::path python = packages.parent_path();
    if ((name == "dist-packages" || name == "site-packages") && python.filename().string().starts_with("python3") &&
        python.parent_path().filename() == "lib")
      roots.push_back(python.parent_path().parent_path());
  }
  return roots;
}

}  // namespace

std::string installed_or_built(std::string_view relative, std::string_view built) {
  static const std::vector<fs::path> roots = installed_roots(own_file());
  std::error_code ec;
  for (const fs::path& root : roots) {
    const fs::path candidate = root / fs::path(relative);
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  return std::string(built);
}

}  // namespace swa::platform
