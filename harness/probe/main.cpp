// swa-h5-probe FILE MAX_BYTES: reads an HDF5 file from outside whole, in a process of its own
// (swa/harness/base/h5_probe.hpp). Exit 0: it reads; 1: it does not (why, on stdout); killed by a
// signal: it crashed libhdf5.
#include <hdf5.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "swa/harness/base/h5_probe.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: swa-h5-probe FILE MAX_BYTES (started by swa-harness)\n");
    return 2;
  }
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // the reason goes to stdout, not libhdf5's stack to stderr
  const std::string why = swa::h5::probe_here(argv[1], std::strtoull(argv[2], nullptr, 10));
  if (why.empty()) return 0;
  std::fputs(why.c_str(), stdout);
  return 1;
}
