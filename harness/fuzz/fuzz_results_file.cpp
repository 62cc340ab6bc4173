// libFuzzer target: any bytes as a results file, through read_results (the path --resume, merge and
// bisect --from take). It must refuse (an exception naming the file) or read; never crash. Start it
// from real results files (harness/fuzz/README.md): random bytes rarely get past HDF5's signature.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "swa/harness/store/results_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/swa-fuzz-results-" + std::to_string(::getpid()) + ".h5";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    swa::harness::read_results(path);
  } catch (const std::exception&) {
  }
  return 0;
}
