#pragma once
#include <sstream>
#include <string>

namespace swa::harness {

// "a<sep>b<sep>c" from any range of streamable items.
template <class Range>
std::string join(const Range& items, const std::string& sep) {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << sep;
    out << item;
    first = false;
  }
  return out.str();
}

}  // namespace swa::harness
