#include "swa/harness/base/id_pattern.hpp"

#include <re2/re2.h>

#include <stdexcept>

namespace swa::harness {

IdPattern::IdPattern(const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(64 << 20);  // a pattern whose automaton needs more is refused, not run slowly
  re_ = std::make_unique<RE2>(pattern, options);
  if (!re_->ok()) throw std::invalid_argument(re_->error());
}

IdPattern::~IdPattern() = default;
IdPattern::IdPattern(IdPattern&&) noexcept = default;
IdPattern& IdPattern::operator=(IdPattern&&) noexcept = default;

bool IdPattern::found_in(std::string_view text) const { return RE2::PartialMatch(text, *re_); }

}  // namespace swa::harness
