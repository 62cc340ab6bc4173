#pragma once
// Name <-> value lookups for the small enums, driven by each enum's kAll* list and its *_name
// function, which reads a table of {value, name} pairs: each name is written once.
#include <optional>
#include <string>
#include <string_view>

namespace swa {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value` in a table of {value, name} pairs; "?" for a value the table lacks (a value cast
// from an out-of-range integer).
template <class E, std::size_t N>
constexpr std::string_view name_in(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& e : table)
    if (e.value == value) return e.name;
  return "?";
}

// Whether the table names every value of the enum's kAll* list, and nothing else: checked with a
// static_assert beside each table, in place of the switch's missing-case warning.
template <class E, std::size_t N, std::size_t M>
constexpr bool names_every(const EnumName<E> (&table)[N], const E (&all)[M]) {
  if (N != M) return false;
  for (E value : all)
    if (name_in(table, value) == "?") return false;
  return true;
}

template <class E, std::size_t N, class NameOf>
std::optional<E> parse_enum(std::string_view text, const E (&all)[N], NameOf name_of) {
  for (E value : all)
    if (name_of(value) == text) return value;
  return std::nullopt;
}

// An enum's name function over its {value, name} table, and its parse function over the kAll* list:
//   SWA_ENUM_NAMES(RunMode, mode_name, parse_mode, kAllRunModes,
//                  {RunMode::prefill, "prefill"}, {RunMode::chunked_prefill, "chunked_prefill"}, ...)
#define SWA_ENUM_NAMES(Type, name_fn, parse_fn, all, ...)                                       \
  std::string_view name_fn(Type value) {                                                       \
    static constexpr ::swa::EnumName<Type> kNames[] = {__VA_ARGS__};                           \
    static_assert(::swa::names_every(kNames, all), "a " #Type " without its name");            \
    return ::swa::name_in(kNames, value);                                                      \
  }                                                                                            \
  std::optional<Type> parse_fn(std::string_view name) { return ::swa::parse_enum(name, all, name_fn); }

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
