#pragma once
// An HDF5 file that came from outside (a DUT's response) read first in another process: a damaged
// file can crash libhdf5 or send it into a loop, and indirection (external links or storage, virtual
// datasets, filter plugins) can make a read block on a FIFO or load code. The probe is a separate
// program (swa-h5-probe), not a fork: a fork of the multithreaded harness can inherit HDF5's global
// lock held by another thread.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace swa::h5 {

// What the probe does, in its own process: refuse indirection (h5::indirection) before reading a
// byte of data, then read every dataset and attribute, refusing a dataset whose data would take more
// than `max_bytes` in memory. Empty when the file reads whole; else what is wrong with it.
std::string probe_here(const std::filesystem::path& path, std::uintmax_t max_bytes);

// Runs swa-h5-probe on `path` (at most `seconds`). Empty when the file reads whole; else why not:
// "is refused unread: /out is an external link", "crashed the HDF5 library (signal 11, ...)",
// "did not finish reading in 30 s".
std::string probe_in_child(const std::filesystem::path& path, std::uintmax_t max_bytes, double seconds);

}  // namespace swa::h5
