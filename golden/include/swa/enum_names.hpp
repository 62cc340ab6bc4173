#pragma once
// Name <-> value lookups for the small enums of the params, driven by each enum's kAll* list and
// its *_name function, so names are written once.
#include <optional>
#include <string>
#include <string_view>

namespace swa {

template <class E, std::size_t N, class NameOf>
std::optional<E> parse_enum(std::string_view text, const E (&all)[N], NameOf name_of) {
  for (E value : all)
    if (name_of(value) == text) return value;
  return std::nullopt;
}

template <class E, std::size_t N, class NameOf>
std::string enum_choices(const E (&all)[N], NameOf name_of) {
  std::string out;
  for (E value : all) {
    if (!out.empty()) out += '|';
    out += name_of(value);
  }
  return out;
}

}  // namespace swa
