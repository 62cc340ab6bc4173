#include "swa/platform/outside_text.hpp"

#include <cstdint>
#include <cstdio>

namespace swa::platform {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at `s[i]` and its code point; 0 when it is not one.
std::size_t sequence_at(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  std::size_t n;
  std::uint32_t min;
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return 0;
  return n;
}

}  // namespace

std::string clean_text(std::string_view raw, std::size_t cap) {
  std::string out;
  out.reserve(raw.size() < cap ? raw.size() : cap);
  std::size_t i = 0;
  for (; i < raw.size();) {
    std::uint32_t cp = 0;
    const std::size_t n = sequence_at(raw, i, cp);
    std::string piece;
    char code[16];
    if (n == 0) {
      piece = kReplacement;
    } else if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7F) {
      std::snprintf(code, sizeof code, "\\x%02x", static_cast<unsigned>(cp));
      piece = code;
    } else if (cp >= 0x80 && cp <= 0x9F) {
      std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned>(cp));
      piece = code;
    } else {
      piece = raw.substr(i, n);
    }
    if (out.size() + piece.size() > cap) break;
    out += piece;
    i += n == 0 ? 1 : n;
  }
  if (i < raw.size()) out += " [... " + std::to_string(raw.size() - i) + " more bytes]";
  return out;
}

}  // namespace swa::platform
