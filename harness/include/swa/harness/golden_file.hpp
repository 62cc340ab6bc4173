#pragma once
#include <filesystem>
#include <vector>

#include "swa/golden.hpp"
#include "swa/harness/problem.hpp"

namespace swa::harness {

// Writes a problem's inputs, its golden output and its same-precision baseline to one HDF5 file
// (layout in harness/README.md), atomically.
void write_golden_file(const std::filesystem::path& path, const Problem& problem, const golden::Output& golden,
                       const std::vector<float>& baseline);

}  // namespace swa::harness
