#include "abi_convert.hpp"

#include <algorithm>
#include <cstring>
#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "swa/kernel_fields.hpp"

namespace swa::dut::abi {
namespace {

// Where each 2.x minor version's fields end in swa_dut_v2_params, from the field list: a plugin whose
// params_size reaches a version's end knows its fields.
constexpr std::array<std::size_t, kKernelFieldsLatestMinor + 1> minor_ends() {
  std::array<std::size_t, kKernelFieldsLatestMinor + 1> end{};
#define SWA_FIELD_END(field, member, minor, exec) \
  end[minor] = std::max(end[minor], offsetof(swa_dut_v2_params, field) + sizeof(swa_dut_v2_params::field));
  SWA_KERNEL_FIELDS(SWA_FIELD_END)
#undef SWA_FIELD_END
  return end;
}
constexpr auto kV2MinorEnd = minor_ends();

// The size a header of that version gave the struct: its fields' end, padded to the struct's alignment.
constexpr std::size_t padded(std::size_t bytes) {
  return (bytes + alignof(swa_dut_v2_params) - 1) / alignof(swa_dut_v2_params) * alignof(swa_dut_v2_params);
}
static_assert(padded(kV2MinorEnd[kKernelFieldsLatestMinor]) == sizeof(swa_dut_v2_params),
              "swa/dut_v2.h has fields past the list's last: list them in swa/kernel_fields.hpp");

// Every member of swa_dut_v2_params is a listed field, struct_size or a version's tail padding
// (reserved_*): in order of offset, each starts where the one before ends, rounded up to its
// alignment. A field missing from the list leaves a gap.
struct Member {
  std::size_t offset, size, align;
};
#define SWA_MEMBER(field) \
  Member{offsetof(swa_dut_v2_params, field), sizeof(swa_dut_v2_params::field), alignof(decltype(swa_dut_v2_params::field))},
constexpr bool members_tile_the_struct() {
#define SWA_LISTED_MEMBER(field, member, minor, exec) SWA_MEMBER(field)
  std::array members = {SWA_MEMBER(struct_size) SWA_MEMBER(reserved_2_1) SWA_MEMBER(reserved_2_2)
                            SWA_KERNEL_FIELDS(SWA_LISTED_MEMBER)};
#undef SWA_LISTED_MEMBER
  std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.offset < b.offset; });
  std::size_t end = 0;
  for (const Member& m : members) {
    if (m.offset != (end + m.align - 1) / m.align * m.align) return false;
    end = m.offset + m.size;
  }
  return padded(end) == sizeof(swa_dut_v2_params);
}
#undef SWA_MEMBER
static_assert(members_tile_the_struct(),
              "swa_dut_v2_params has a member that swa/kernel_fields.hpp does not list (or lists twice)");

// Every pointer field of the list is an array of SWA_KERNEL_ARRAYS (a worker copies and rebases only
// those), and every array a pointer field.
constexpr int pointer_fields() {
  int n = 0;
#define SWA_COUNT_POINTER(field, member, minor, exec) n += std::is_pointer_v<decltype(swa_dut_v2_params::field)>;
  SWA_KERNEL_FIELDS(SWA_COUNT_POINTER)
#undef SWA_COUNT_POINTER
  return n;
}
#define SWA_ARRAY_IS_POINTER(field, bytes, written)                        \
  static_assert(std::is_pointer_v<decltype(swa_dut_v2_params::field)>, \
                "SWA_KERNEL_ARRAYS lists " #field ", which is no pointer field of swa_dut_v2_params");
SWA_KERNEL_ARRAYS(SWA_ARRAY_IS_POINTER)
#undef SWA_ARRAY_IS_POINTER
constexpr int arrays_listed() {
  const char* names[] = {
#define SWA_ARRAY_NAME(field, bytes, written) #field,
      SWA_KERNEL_ARRAYS(SWA_ARRAY_NAME)
#undef SWA_ARRAY_NAME
  };
  const int n = static_cast<int>(sizeof names / sizeof names[0]);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (std::string_view(names[i]) == names[j]) return -1;  // listed twice
  return n;
}
static_assert(arrays_listed() == pointer_fields(),
              "a pointer field of SWA_KERNEL_FIELDS is not in SWA_KERNEL_ARRAYS (or one is listed twice): list it "
              "with its size in swa/kernel_fields.hpp, or a plugin's worker gets a pointer into the harness");

}  // namespace

// Each listed field where its version put it: the C struct is written by hand (swa/dut_v2.h), so its
// layout is checked here field by field. A field of minor version m starts past version m - 1's padded
// size (so a plugin built against m - 1 never reads it) and holds the AttnParams member it carries.
#define SWA_CHECK_FIELD(field, member, minor, exec)                                                  \
  static_assert(sizeof(swa_dut_v2_params::field) == sizeof(AttnParams::member) ||                  \
                    std::is_enum_v<decltype(AttnParams::member)>,                                  \
                "swa_dut_v2_params." #field " does not hold AttnParams." #member);                  \
  static_assert((minor) == 0 || offsetof(swa_dut_v2_params, field) >= padded(kV2MinorEnd[(minor) - 1]), \
                "swa_dut_v2_params." #field " is not past the padded size of the version before its own");
SWA_KERNEL_FIELDS(SWA_CHECK_FIELD)
#undef SWA_CHECK_FIELD

swa_dut_v2_params to_c(const AttnParams& p) {
  swa_dut_v2_params c{};
  c.struct_size = sizeof c;
#define SWA_TO_C(field, member, minor, exec) c.field = static_cast<decltype(c.field)>(p.member);
  SWA_KERNEL_FIELDS(SWA_TO_C)
#undef SWA_TO_C
  return c;
}

AttnParams from_c(const swa_dut_v2_params& c) {
  AttnParams p;
  // A field past the struct_size the caller knows keeps its default (a plugin built against 2.0 hands
  // the harness's helpers a 2.0 struct).
#define SWA_FROM_C(field, member, minor, exec) \
  if ((minor) == 0 || SWA_DUT_V2_HAS(&c, swa_dut_v2_params, field)) p.member = static_cast<decltype(p.member)>(c.field);
  SWA_KERNEL_FIELDS(SWA_FROM_C)
#undef SWA_FROM_C
  return p;
}

CacheView::CacheView(KvCache& cache) {
  for (const auto& g : cache.geometry) base.push_back(g.base);
  tokens_written = cache.tokens_written;
  c.struct_size = sizeof c;
  c.policy = static_cast<int32_t>(cache.policy);
  c.dtype = static_cast<int32_t>(cache.dtype);
  c.slots = cache.slots;
  c.heads_kv = cache.heads_kv;
  c.head_size = cache.head_size;
  c.batch = static_cast<int32_t>(cache.tokens_written.size());
  c.base = base.data();
  c.tokens_written = tokens_written.data();
  c.k = cache.k.data();
  c.v = cache.v.data();
  c.kv_format = static_cast<int32_t>(cache.format);
  page_table = cache.page_table;
  c.page_size = cache.page_size;
  c.pages = cache.pages;
  c.table_width = cache.table_width;
  c.page_table = page_table.empty() ? nullptr : page_table.data();
}

void CacheView::refresh_pages(const KvCache& cache) {
  std::copy(cache.page_table.begin(), cache.page_table.end(), page_table.begin());
}

void CacheView::sync_back(KvCache& cache) const {
  for (std::size_t b = 0; b < base.size(); ++b) cache.geometry[b].base = base[b];
  cache.tokens_written = tokens_written;
  cache.page_table = page_table;  // a plugin must leave it as it is; the cache check sees if it did not
}

KvCache copy_from_c(const swa_dut_v2_cache& c) {
  KvCache k;
  k.policy = static_cast<CachePolicy>(c.policy);
  k.dtype = static_cast<DType>(c.dtype);
  k.slots = c.slots;
  k.heads_kv = c.heads_kv;
  k.head_size = c.head_size;
  if (SWA_DUT_V2_HAS(&c, swa_dut_v2_cache, kv_format)) k.format = static_cast<KvFormat>(c.kv_format);
  for (int b = 0; b < c.batch; ++b) k.geometry.push_back({c.slots, c.base[b]});
  k.tokens_written.assign(c.tokens_written, c.tokens_written + c.batch);
  std::size_t slots = static_cast<std::size_t>(c.batch) * c.slots;
  if (k.paged() && SWA_DUT_V2_HAS(&c, swa_dut_v2_cache, page_table)) {
    k.page_size = c.page_size;
    k.pages = c.pages;
    k.table_width = c.table_width;
    k.page_table.assign(c.page_table, c.page_table + c.batch * c.table_width);
    slots = static_cast<std::size_t>(c.pages) * c.page_size;
  }
  const std::size_t bytes = slots * c.heads_kv * c.head_size * k.element_bytes();
  k.k.assign(static_cast<const unsigned char*>(c.k), static_cast<const unsigned char*>(c.k) + bytes);
  k.v.assign(static_cast<const unsigned char*>(c.v), static_cast<const unsigned char*>(c.v) + bytes);
  return k;
}

void copy_back_to_c(const KvCache& k, swa_dut_v2_cache& c) {
  for (int b = 0; b < c.batch; ++b) {
    c.base[b] = k.geometry[b].base;
    c.tokens_written[b] = k.tokens_written[b];
  }
  if (k.paged()) std::copy(k.page_table.begin(), k.page_table.end(), c.page_table);
  std::copy(k.k.begin(), k.k.end(), static_cast<unsigned char*>(c.k));
  std::copy(k.v.begin(), k.v.end(), static_cast<unsigned char*>(c.v));
}

Traits to_traits(const swa_dut_v2_traits& t) {
  Traits out;
  out.query_tile = t.query_tile;
  out.key_tile = t.key_tile;
  out.head_sizes.assign(t.head_sizes, t.head_sizes + std::clamp(t.head_size_count, 0, 16));
  std::sort(out.head_sizes.begin(), out.head_sizes.end());
  out.times_own_kernels = t.times_own_kernels != 0;
  out.cache = t.cache_private ? CacheReport::none : CacheReport::every_call;
  // The plugin's own text, up to its NUL or the array's end: a console column is no place for
  // escapes or spaces.
  const std::string name(t.name, strnlen(t.name, sizeof t.name));
  if (is_short_name(name)) out.name = name;
  return out;
}

namespace {
std::string named_bits(uint32_t bits, const char* const* names, int count) {
  std::string out;
  for (int i = 0; i < count; ++i)
    if (bits & (1u << i)) out += (out.empty() ? "" : ", ") + std::string(names[i]);
  return out;
}
}  // namespace

std::string outside_traits(const swa_dut_v2_traits& t, const AttnParams& p) {
  static const char* const dtypes[] = {"fp32", "fp16", "bf16"};
  static const char* const modes[] = {"prefill", "chunked_prefill", "decode"};
  static const char* const policies[] = {"ring_modulo", "ring_compact", "linear", "paged"};
  static const char* const masks[] = {"none", "swa_norm", "swa_compress"};
  auto outside = [](uint32_t bits, int value) { return bits != 0 && !(bits & (1u << value)); };
  const std::string prefix = "the plugin describes itself as running ";
  if (outside(t.dtypes, static_cast<int>(p.dtype))) return prefix + "dtypes " + named_bits(t.dtypes, dtypes, 3) + " only";
  if (outside(t.modes, static_cast<int>(p.mode))) return prefix + "modes " + named_bits(t.modes, modes, 3) + " only";
  if (p.mode != RunMode::prefill && outside(t.cache_policies, static_cast<int>(p.cache)))
    return prefix + "caches " + named_bits(t.cache_policies, policies, 4) + " only";
  if (outside(t.mask_formats, static_cast<int>(p.mask_format)))
    return prefix + "mask formats " + named_bits(t.mask_formats, masks, 3) + " only";
  const Traits traits = to_traits(t);
  if (!traits.head_sizes.empty() &&
      std::find(traits.head_sizes.begin(), traits.head_sizes.end(), p.head_size) == traits.head_sizes.end()) {
    std::string sizes;
    for (int d : traits.head_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(d);
    return prefix + "head sizes " + sizes + " only";
  }
  // A case that uses a field a 2.x header appended is skipped for a plugin whose params_size ends
  // before that version's last field (swa/dut_v2.h promises that); v1 plugins count as 2.0.
  for (int minor = 1; minor <= kKernelFieldsLatestMinor; ++minor) {
    const std::string field = kernel_field_used_first(p, minor);
    if (field.empty() || t.params_size >= kV2MinorEnd[minor]) continue;
    return "the plugin was built against an ABI without the " + field + " field (params_size " +
           std::to_string(t.params_size) + ": before swa/dut_v2.h 2." + std::to_string(minor) + ", whose fields end at " +
           std::to_string(kV2MinorEnd[minor]) + "), and this case sets it";
  }
  return {};
}

}  // namespace swa::dut::abi
