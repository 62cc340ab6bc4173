#include "swa/harness/case/problem.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "swa/atb_masks.hpp"
#include "swa/paging.hpp"

namespace swa::harness {
namespace {

std::vector<unsigned char> to_storage(const std::vector<float>& values, DType dtype) {
  std::vector<unsigned char> bytes(values.size() * dtype_bytes(dtype));
  store_all_as(dtype, values.data(), values.size(), bytes.data());
  return bytes;
}

// The ATB mask the scenario asks for, from the doc sample it names (python by default); the kernel
// reads a compressed mask with the same sample's block rule (mask-check: matched pairings agree). fp32 runs get the fp16 fill (only value == 0 matters).
void attach_mask(const ProblemSpec& spec, Problem& pr) {
  AttnParams& p = pr.params;
  p.mask_format = spec.mask;
  if (spec.mask == MaskFormat::none) return;
  MaskSpec m;
  m.type = spec.mask == MaskFormat::swa_norm ? MaskType::swa_norm : MaskType::swa_compress;
  m.window = *band_keys_including_self(spec.band);
  m.max_seq = *std::max_element(spec.seq_lens.begin(), spec.seq_lens.end());
  m.head_size = spec.head_size;
  m.dtype = spec.dtype == DType::bf16 ? DType::bf16 : DType::fp16;
  m.generator = spec.mask_generator;
  const Mask mask = generate_mask(m);
  pr.mask = mask.values;
  p.mask = pr.mask.data();
  p.mask_rows = mask.rows;
  if (spec.mask == MaskFormat::swa_compress) {
    const CompressGeometry g = compress_geometry(spec.mask_generator, spec.head_size, m.window);
    p.mask_block = static_cast<int>(g.block);
    p.mask_effective_window = g.effective_window;
  }
}

// max |x| over values in dtype storage, a block at a time.
double amax_of_storage(const std::vector<unsigned char>& bytes, DType dtype) {
  double m = 0;
  for_each_loaded_block(dtype, bytes.data(), bytes.size() / dtype_bytes(dtype), [&](const float* block, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(block[i])));
  });
  return m;
}

void finish_problem(const ProblemSpec& spec, Problem& pr);

void start_problem(const ProblemSpec& spec, Problem& pr) {
  pr.spec = spec;
  pr.seq_offsets.assign(spec.seq_lens.size() + 1, 0);
  for (std::size_t b = 0; b < spec.seq_lens.size(); ++b)
    pr.seq_offsets[b + 1] = pr.seq_offsets[b] + spec.seq_lens[b];
}

}  // namespace

void build_problem(const ProblemSpec& spec, Problem& pr) {
  start_problem(spec, pr);
  const std::int64_t n = pr.seq_offsets.back();
  const std::int64_t q_row = static_cast<std::int64_t>(spec.heads_q) * spec.head_size;
  const std::int64_t kv_row = static_cast<std::int64_t>(spec.heads_kv) * spec.head_size;
  pr.q = generate_tensor(spec.seed, TensorRole::q, spec.inputs, n, q_row, spec.head_size, spec.dtype);
  pr.k = generate_tensor(spec.seed, TensorRole::k, spec.inputs, n, kv_row, spec.head_size, spec.dtype);
  pr.v = generate_tensor(spec.seed, TensorRole::v, spec.inputs, n, kv_row, spec.head_size, spec.dtype);
  pr.q_storage = to_storage(pr.q, spec.dtype);
  pr.k_storage = to_storage(pr.k, spec.dtype);
  pr.v_storage = to_storage(pr.v, spec.dtype);
  finish_problem(spec, pr);
}

bool build_problem(const ProblemSpec& spec, Problem& pr, ProblemTensors&& given) {
  start_problem(spec, pr);
  const auto n = static_cast<std::size_t>(pr.seq_offsets.back());
  const std::size_t elem = dtype_bytes(spec.dtype);
  if (given.q.size() != n * spec.heads_q * spec.head_size * elem ||
      given.k.size() != n * spec.heads_kv * spec.head_size * elem || given.v.size() != given.k.size())
    return false;
  pr.q_storage = std::move(given.q);
  pr.k_storage = std::move(given.k);
  pr.v_storage = std::move(given.v);
  finish_problem(spec, pr);  // the floats stay empty: nothing on a run's path reads them
  return true;
}

namespace {

// Everything but Q, K and V: params, paging, descales, sinks, the mask; then validation.
void finish_problem(const ProblemSpec& spec, Problem& pr) {
  AttnParams& p = pr.params;
  p = spec.kernel;
  p.q = pr.q_storage.data();
  p.k = pr.k_storage.data();
  p.v = pr.v_storage.data();
  p.dtype = spec.dtype;
  p.batch = static_cast<int>(spec.seq_lens.size());
  p.seq_lens = pr.spec.seq_lens.data();
  p.seq_offsets = pr.seq_offsets.data();
  p.heads_q = spec.heads_q;
  p.heads_kv = spec.heads_kv;
  p.head_size = spec.head_size;
  p.band = spec.band;
  p.scale = spec.scale > 0.f ? spec.scale : default_scale(spec.head_size);
  p.mode = spec.mode;
  p.cache = spec.cache;
  p.chunk = spec.chunk;
  p.decode_steps = spec.decode_steps;
  if (spec.mode != RunMode::prefill && spec.cache == CachePolicy::paged) {
    p.page_size = spec.page_size;
    if (p.page_size < 1 || p.page_size > kMaxPageSize)
      throw std::invalid_argument("page_size must be 1.." + std::to_string(kMaxPageSize) + ", got " +
                                  std::to_string(p.page_size));
    p.pool_pages = static_cast<int>(paged_pool_pages(p));
    pr.page_order = draw_page_order(spec.seed, p.pool_pages);
    p.page_order = pr.page_order.data();
  }
  p.softcap = spec.softcap;
  p.kv_format = spec.kv_format;
  if (is_fp8(spec.kv_format)) {
    p.k_descale = draw_kv_descale(spec.seed, spec.kv_format, 0, amax_of_storage(pr.k_storage, spec.dtype));
    p.v_descale = draw_kv_descale(spec.seed, spec.kv_format, 1, amax_of_storage(pr.v_storage, spec.dtype));
    // K and V are drawn alike, so their descales can come out at a power of two of each other;
    // then a kernel that reads V with k_descale differs only at saturation and in subnormals.
    const double ratio = std::log2(static_cast<double>(p.v_descale) / p.k_descale);
    if (std::abs(ratio - std::round(ratio)) < 0.15) {
      const bool clips = amax_of_storage(pr.v_storage, spec.dtype) / p.v_descale > fp8_max(spec.kv_format);
      const double away = clips ? 1 / 1.3 : 1.3;  // V keeps its kind: clipping, or headroom
      p.v_descale = off_coarse_grids(p.v_descale * away, away);
    }
  }
  pr.sinks = spec.sinks ? generate_sinks(spec.seed, spec.heads_q, spec.dtype) : std::vector<float>{};
  p.sinks = spec.sinks ? pr.sinks.data() : nullptr;
  set_contiguous_strides(p);
  attach_mask(spec, pr);
  validate(p);
}

}  // namespace

std::int64_t estimate_memory_bytes(const ProblemSpec& spec) {
  // In double, clamped: the sizes of a hostile sweep overflow int64 (a huge scenario once
  // estimated to 0 bytes and got through validation). An estimate needs no more than 53 bits.
  double n = 0, longest = 0;
  for (auto len : spec.seq_lens) {
    n += static_cast<double>(len);
    longest = std::max(longest, static_cast<double>(len));
  }
  const double q_elems = n * spec.heads_q * spec.head_size;
  const double kv_elems = 2 * n * spec.heads_kv * spec.head_size;
  const auto storage = static_cast<double>(dtype_bytes(spec.dtype));
  const double inputs = (q_elems + kv_elems) * (4 + storage + 8);
  const double outputs = q_elems * (8 + 4 + 4 + storage);
  const double mask = spec.mask == MaskFormat::swa_norm ? longest * longest * 4 : 0;
  const double total = inputs + outputs + mask;
  constexpr double kMax = 9.0e18;  // below INT64_MAX
  return total >= kMax ? static_cast<std::int64_t>(kMax) : static_cast<std::int64_t>(total);
}

std::int64_t default_memory_limit_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page / 2 : (std::int64_t{8} << 30);
}

}  // namespace swa::harness
