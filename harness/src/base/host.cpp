#include "swa/harness/base/host.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace swa::harness {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string command_word(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::canonical("/proc/self/exe", ec);
  if (ec) return name;
  // Started by a launcher (the Python package's console script swa_harness._cli, which execs this
  // file): the launcher is the program that pastes, told by SWA_HARNESS_LAUNCHER, when
  // SWA_HARNESS_LAUNCHED names this very file (not a program the launcher's children started).
  fs::path launcher;
  const char* launcher_env = std::getenv("SWA_HARNESS_LAUNCHER");
  const char* launched_env = std::getenv("SWA_HARNESS_LAUNCHED");
  if (launcher_env && *launcher_env && launched_env && *launched_env && fs::equivalent(launched_env, self, ec) &&
      fs::path(launcher_env).is_absolute() && fs::exists(launcher_env, ec))
    launcher = launcher_env;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (dir.empty()) continue;  // the current folder: not a place a pasted command finds it from elsewhere
      const fs::path candidate = fs::path(dir) / name;
      if (!fs::exists(candidate, ec)) continue;
      if (fs::equivalent(candidate, self, ec)) return name;
      if (!launcher.empty() && fs::equivalent(candidate, launcher, ec)) return name;
      break;  // the first of that name is another program: the path it is
    }
  }
  return launcher.empty() ? self.string() : launcher.string();
}

}  // namespace swa::harness
