#include "swa/golden.hpp"

namespace swa::golden {

std::string_view build_id() { return SWA_GOLDEN_BUILD_ID; }

}  // namespace swa::golden
