// libFuzzer target: any bytes as a sweep file. load_sweep_file must refuse (SweepError) or accept;
// never crash, hang or allocate without bound. Built with -DSWA_FUZZ=ON and clang (harness/fuzz/README.md).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "swa/harness/case/sweep_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/swa-fuzz-sweep-" + std::to_string(::getpid()) + ".yaml";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    swa::harness::SweepLoadOptions options;
    options.max_scenarios = 20000;  // the fuzzer's inputs are small; keep each execution fast
    swa::harness::load_sweep_file(path, options);
  } catch (const swa::harness::SweepError&) {
  }
  return 0;
}
