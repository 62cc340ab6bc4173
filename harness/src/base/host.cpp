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
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (dir.empty()) continue;  // the current folder: not a place a pasted command finds it from elsewhere
      const fs::path candidate = fs::path(dir) / name;
      if (!fs::exists(candidate, ec)) continue;
      if (fs::equivalent(candidate, self, ec)) return name;
      break;  // the first of that name is another program: the path it is
    }
  }
  return self.string();
}

}  // namespace swa::harness
