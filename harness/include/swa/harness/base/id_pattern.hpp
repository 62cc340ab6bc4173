#pragma once
// A --filter (or --only) pattern searched in scenario IDs and case names: RE2 syntax, matched in
// time linear in the text, with no recursion, so no pattern can hang or overflow the stack the
// way std::regex did on `(.*)*(.*)*X` and `seqs=(.)*X`. No backreferences or lookaround.
#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace swa::harness {

class IdPattern {
 public:
  // Throws std::invalid_argument with RE2's reason when `pattern` does not compile.
  explicit IdPattern(const std::string& pattern);
  ~IdPattern();
  IdPattern(IdPattern&&) noexcept;
  IdPattern& operator=(IdPattern&&) noexcept;
  bool found_in(std::string_view text) const;

 private:
  std::unique_ptr<re2::RE2> re_;
};

}  // namespace swa::harness
