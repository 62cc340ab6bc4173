#pragma once
// The checks made of an output path before anything runs, so that writing there destroys nothing:
// one implementation for run's and merge's --out and --junit (cli's guard_output) and for the pytest
// plugin's --swa-out and --swa-junit (swa_harness._core.guard_output).
#include <string>
#include <utility>
#include <vector>

namespace swa::harness {

// What an output path will hold, so that an existing file of another kind is not replaced.
enum class OutputFileKind { results, junit };

// Throws std::invalid_argument("option OPTION: PATH ... why") when `path`, for `option`, is the same
// file as one of `others` (inputs and other outputs: {what it is in words, its path}; empty paths are
// skipped), lies in a missing or unwritable folder, is a folder, or is an existing non-empty file that
// is not what `kind` writes (a swa-harness results file, a JUnit XML file) and `force` is false; the
// message then names `force_option` as the way to replace it anyway.
void check_output_path(const std::string& option, const std::string& path, OutputFileKind kind, bool force,
                       const std::vector<std::pair<std::string, std::string>>& others,
                       const std::string& force_option = "--force");

}  // namespace swa::harness
