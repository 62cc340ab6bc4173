#pragma once
// Text from outside the project (a DUT's messages, a child's captured output, a response's error
// attribute) made safe for every place it goes: the results file, JUnit XML, the HTML report, the
// console.
#include <cstddef>
#include <string>
#include <string_view>

namespace swa::platform {

// The most bytes of a DUT's text a reason keeps.
inline constexpr std::size_t kOutsideTextCap = 4096;

// Valid UTF-8 (each byte of an invalid, overlong or surrogate sequence, and U+FFFE/U+FFFF, becomes
// U+FFFD), control characters other than newline and tab shown as text (ESC as "\x1b", DEL "\x7f",
// C1 controls "\u0085"), and at most `cap` bytes: cut on a character boundary, with
// " [... N more bytes]" after it. What it returns is valid XML 1.0 character data once & < > " are
// escaped, and prints as itself on a terminal.
std::string clean_text(std::string_view raw, std::size_t cap = kOutsideTextCap);

}  // namespace swa::platform
