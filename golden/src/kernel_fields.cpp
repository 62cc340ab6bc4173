#include "swa/kernel_fields.hpp"

namespace swa {

const char* kernel_field_used_first(const AttnParams& p, int minor) {
  if (minor == 0) return "";
  static const AttnParams defaults;
#define SWA_FIELD_USED(field, member, field_minor, exec) \
  if ((field_minor) == minor && p.member != defaults.member) return #field;
  SWA_KERNEL_FIELDS(SWA_FIELD_USED)
#undef SWA_FIELD_USED
  return "";
}

int kernel_fields_minor_used(const AttnParams& p) {
  for (int minor = kKernelFieldsLatestMinor; minor > 0; --minor)
    if (*kernel_field_used_first(p, minor)) return minor;
  return 0;
}

}  // namespace swa
