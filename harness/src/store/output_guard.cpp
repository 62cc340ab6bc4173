#include "swa/harness/store/output_guard.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "swa/harness/store/results_file.hpp"

namespace swa::harness {

namespace {

namespace fs = std::filesystem;

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

bool looks_like_junit(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.rfind("<?xml", 0) == 0 && head.find("<testsuites") != std::string::npos;
}

}  // namespace

void check_output_path(const std::string& option, const std::string& path, OutputFileKind kind, bool force,
                       const std::vector<std::pair<std::string, std::string>>& others,
                       const std::string& force_option) {
  const auto refuse = [&](const std::string& why) { throw std::invalid_argument("option " + option + ": " + why); };
  if (path.empty()) refuse("empty path");
  for (const auto& [name, other] : others)
    if (!other.empty() && same_file(path, other)) refuse(path + " is also " + name + "; give it a path of its own");
  std::error_code ec;
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) refuse("folder " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) refuse("folder " + dir.string() + " is not writable");
  if (!fs::exists(path, ec)) return;
  if (fs::is_directory(path, ec)) refuse(path + " is a folder");
  if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) == 0) return;  // e.g. made by mktemp
  const bool ours = kind == OutputFileKind::results ? looks_like_results_file(path) : looks_like_junit(path);
  if (!ours && !force)
    refuse(path + " exists and is not " +
           (kind == OutputFileKind::results ? "a swa-harness results file" : "a JUnit XML file") +
           "; refusing to replace it (pass " + force_option + " to replace it anyway)");
}

}  // namespace swa::harness
