#pragma once
// Text helpers: outside text made safe (platform's clean_text), hexadecimal, shell quoting.
#include <cstddef>
#include <string>
#include <string_view>

#include "swa/platform/outside_text.hpp"

namespace swa::harness {

// clean_text and kOutsideTextCap: platform/outside_text.hpp (a plugin worker's output is cleaned
// below the harness too).
using platform::clean_text;
using platform::kOutsideTextCap;

// Lower-case hexadecimal of `bytes` (digests, keys): two characters a byte.
std::string hex_of(const unsigned char* bytes, std::size_t count);

// POSIX shell single-quoting: the word reaches the command unchanged, whatever it holds. A word of
// only letters, digits and _ . / : = , + @ % - is left as it is; shell_quote_always quotes it too.
std::string shell_quote(std::string_view word);
std::string shell_quote_always(std::string_view word);

}  // namespace swa::harness
