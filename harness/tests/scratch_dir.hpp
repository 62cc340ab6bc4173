#pragma once
// A folder of this test process under the system's temporary folder, emptied when made and removed
// when the object goes (at exit, for one at namespace scope). The tests that kept theirs left one
// folder per run behind: 38 MB each for the durable-file test.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace swa::test {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix)
      : dir_(std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return dir_; }
  std::filesystem::path operator/(const std::string& name) const { return dir_ / name; }

 private:
  std::filesystem::path dir_;
};

}  // namespace swa::test
