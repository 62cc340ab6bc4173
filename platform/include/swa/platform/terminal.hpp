// What the project asks of a terminal: its width, so a progress line never wraps.
#pragma once

#include <optional>

namespace swa::platform {

// The columns of the terminal on `fd` (TIOCGWINSZ), else $COLUMNS when it is a number in 10..10000;
// nullopt when neither says (a pipe, a file, a terminal that reports 0).
std::optional<int> terminal_columns(int fd);

}  // namespace swa::platform
