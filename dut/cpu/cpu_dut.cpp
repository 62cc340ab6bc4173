#include "swa/dut/cpu_dut.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "convert.hpp"
#include "dispatch.hpp"
#include "flash_tile.hpp"
#include "fused_kv.hpp"
#include "isa_levels.hpp"
#include "isa_setting.hpp"
#include "swa/dut/fp8.hpp"

namespace swa::dut {
namespace {

using cpu::KeyBlock;
using cpu::RowMatrix;
using cpu::Visibility;
using cpu::Workspace;

template <class T>
const T* typed(const void* p) {
  return static_cast<const T*>(p);
}

// One (sequence, kv head, query tile) unit of work.
struct Task {
  int b, kv_head;
  std::int64_t row0, rows;  // query positions [row0, row0 + rows) of sequence b
};

class CpuDut final : public Dut {
 public:
  explicit CpuDut(CpuTuning tuning) : tuning_(tuning) {}
  std::string name() const override { return "cpu"; }

  Traits traits() const override {
    Traits t;
    t.query_tile = tuning_.query_tile;
    t.key_tile = tuning_.key_tile;
    return t;
  }

  Support supports(const AttnParams& p) const override {
    if (p.mask_format == MaskFormat::swa_compress && p.mode == RunMode::chunked_prefill)
      return Support::skip("the compressed mask is read on tiles aligned to its block from position 0; "
                           "chunked prefill starts tiles at chunk boundaries");
    if (p.mask_format != MaskFormat::none && !p.mask) return Support::skip("mask format set but no mask tensor");
    return Support::yes();
  }

  Status prefill(const AttnParams& p) override {
    return with_storage([&](auto tag) { return prefill_typed<decltype(tag)>(p); }, p);
  }
  Status chunked_prefill(const AttnParams& p, KvCache& cache, int chunk_index) override {
    return with_storage([&](auto tag) { return chunk_typed<decltype(tag)>(p, cache, chunk_index); }, p);
  }
  Status decode_step(const AttnParams& p, KvCache& cache, int step) override {
    return with_storage([&](auto tag) { return decode_typed<decltype(tag)>(p, cache, step); }, p);
  }

 private:
  template <class F>
  Status with_storage(F&& f, const AttnParams& p) {
    try {
      return cpu::with_storage_type(p.dtype, std::forward<F>(f));
    } catch (const std::exception& e) {
      return Status::failure(std::string("cpu: ") + e.what());
    }
  }

  // Q rows of one GQA group, times `scale`, stacked head-major into q (heads * rows x D).
  template <class T>
  static void load_queries(const AttnParams& p, int b, int kv_head, std::int64_t row0, std::int64_t rows,
                           float scale, float* q) {
    const int group = p.heads_q / p.heads_kv;
    for (int g = 0; g < group; ++g) {
      const int h = kv_head * group + g;
      const T* src = typed<T>(p.q) + (p.seq_offsets[b] + row0) * p.q_row_stride + h * p.q_head_stride;
      cpu::rows_to_fp32(src, p.q_row_stride, rows, p.head_size, scale, q + g * rows * p.head_size);
    }
  }

  template <class T>
  static void store_outputs(const AttnParams& p, int b, int kv_head, std::int64_t row0, std::int64_t rows,
                            const float* o) {
    const int group = p.heads_q / p.heads_kv;
    for (int g = 0; g < group; ++g) {
      const int h = kv_head * group + g;
      T* dst = static_cast<T*>(p.out) + (p.seq_offsets[b] + row0) * p.out_row_stride + h * p.out_head_stride;
      cpu::rows_from_fp32(o + g * rows * p.head_size, rows, p.head_size, dst, p.out_row_stride);
    }
  }

  // Input K and V rows to fp32 as attention reads them: with an FP8 KV format, through the FP8
  // rounding a cache write would apply.
  template <class T>
  static void input_kv_to_fp32(const AttnParams& p, std::int64_t row, int kv_head, std::int64_t rows, float* k,
                               float* v) {
    cpu::rows_to_fp32(typed<T>(p.k) + row * p.k_row_stride + kv_head * p.k_head_stride, p.k_row_stride, rows,
                      p.head_size, 1.f, k);
    cpu::rows_to_fp32(typed<T>(p.v) + row * p.v_row_stride + kv_head * p.v_head_stride, p.v_row_stride, rows,
                      p.head_size, 1.f, v);
    if (!is_fp8(p.kv_format)) return;
    cpu::fp8_round_trip(k, rows * p.head_size, is_e4m3(p.kv_format), p.k_descale);
    cpu::fp8_round_trip(v, rows * p.head_size, is_e4m3(p.kv_format), p.v_descale);
  }

  // Cache rows (slot_stride elements apart, from byte `offset`) of K or V to fp32: dtype storage or
  // FP8 codes times the descale.
  template <class T>
  static void cache_rows_to_fp32(const KvCache& cache, const std::vector<unsigned char>& bytes, std::size_t offset,
                                 std::int64_t slot_stride, std::int64_t rows, int d, float descale, float* dst) {
    if (!is_fp8(cache.format))
      return cpu::rows_to_fp32(reinterpret_cast<const T*>(bytes.data() + offset), slot_stride, rows, d, 1.f, dst);
    for (std::int64_t r = 0; r < rows; ++r)
      cpu::fp8_to_fp32(&bytes[offset + r * slot_stride], dst + r * d, d, is_e4m3(cache.format), descale);
  }

  // fp32 K and V of sequence rows [row0, row0 + rows) of one kv head: a view for fp32 storage, a
  // converted copy (per kv head, never per q head) otherwise.
  template <class T>
  static KeyBlock sequence_keys(const AttnParams& p, int b, int kv_head, std::int64_t row0, std::int64_t rows,
                                std::vector<float>& k_buf, std::vector<float>& v_buf) {
    const std::int64_t first = p.seq_offsets[b] + row0;
    if constexpr (std::is_same_v<T, float>) {
      if (!is_fp8(p.kv_format))
        return {typed<float>(p.k) + first * p.k_row_stride + kv_head * p.k_head_stride,
                typed<float>(p.v) + first * p.v_row_stride + kv_head * p.v_head_stride, p.k_row_stride, row0, rows};
    }
    k_buf.resize(static_cast<std::size_t>(rows) * p.head_size);
    v_buf.resize(k_buf.size());
    input_kv_to_fp32<T>(p, first, kv_head, rows, k_buf.data(), v_buf.data());
    return {k_buf.data(), v_buf.data(), p.head_size, row0, rows};
  }

  // Runs tasks in parallel; `keys_for` gives the key block of (b, kv_head).
  template <class T, class KeysFor>
  void run_tasks(const AttnParams& p, const std::vector<Task>& tasks, KeysFor&& keys_for) const {
    const Visibility vis(p);
    const int group = p.heads_q / p.heads_kv;
#pragma omp parallel
    {
      Workspace ws;
      std::vector<float> q, o;
#pragma omp for schedule(dynamic, 1)
      for (std::size_t t = 0; t < tasks.size(); ++t) {
        const Task& task = tasks[t];
        q.resize(static_cast<std::size_t>(group) * task.rows * p.head_size);
        o.resize(q.size());
        const KeyBlock keys = keys_for(task.b, task.kv_head);
        // The AMX path takes the bf16 queries unscaled (exact) and scales the scores instead.
        const float q_scale = keys.packed ? 1.f : p.scale, score_scale = keys.packed ? p.scale : 1.f;
        load_queries<T>(p, task.b, task.kv_head, task.row0, task.rows, q_scale, q.data());
        cpu::attend_rows(q.data(), score_scale, group, task.rows, task.row0, p.head_size, keys, vis, p.band,
                         score_rule(p, task.kv_head), tuning_.key_tile, ws, o.data());
        store_outputs<T>(p, task.b, task.kv_head, task.row0, task.rows, o.data());
      }
    }
  }

  // bf16 storage on a CPU with AMX-BF16 or AVX512-BF16 takes the tile products (amx_bf16.hpp); FP8 KV
  // formats keep the fp32 path.
  template <class T>
  static bool use_amx(const AttnParams& p) {
    return std::is_same_v<T, Eigen::bfloat16> && !is_fp8(p.kv_format) && cpu::amx::available();
  }

  static void pack_for_amx(KeyBlock& block, int head_size, cpu::amx::PackedKeys& pack) {
    pack.pack(block.k, block.v, block.stride, block.count, head_size);
    block.packed = &pack;
  }

  static cpu::ScoreRule score_rule(const AttnParams& p, int kv_head) {
    return {p.softcap, p.sinks ? p.sinks + kv_head * (p.heads_q / p.heads_kv) : nullptr};
  }

  int query_tile(const AttnParams& p) const {
    return p.mask_format == MaskFormat::swa_compress ? p.mask_block : tuning_.query_tile;
  }

  template <class T>
  Status prefill_typed(const AttnParams& p) const {
    // fp16/bf16 K/V converted once per (sequence, kv head); fp32 is read in place.
    std::vector<std::vector<float>> k_bufs(static_cast<std::size_t>(p.batch) * p.heads_kv), v_bufs(k_bufs.size());
    std::vector<KeyBlock> blocks(k_bufs.size());
    std::vector<cpu::amx::PackedKeys> packs(use_amx<T>(p) ? blocks.size() : 0);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t u = 0; u < static_cast<std::int64_t>(blocks.size()); ++u) {
      const int b = static_cast<int>(u / p.heads_kv), g = static_cast<int>(u % p.heads_kv);
      if (packs.empty()) {
        blocks[u] = sequence_keys<T>(p, b, g, 0, p.seq_lens[b], k_bufs[u], v_bufs[u]);
        continue;
      }
      // The AMX path reads only the packed keys: packed from storage, with no fp32 copy.
      const std::int64_t first = p.seq_offsets[b];
      packs[u].pack(typed<std::uint16_t>(p.k) + first * p.k_row_stride + g * p.k_head_stride, p.k_row_stride,
                    typed<std::uint16_t>(p.v) + first * p.v_row_stride + g * p.v_head_stride, p.v_row_stride,
                    p.seq_lens[b], p.head_size);
      blocks[u] = {nullptr, nullptr, 0, 0, p.seq_lens[b], &packs[u]};
    }
    std::vector<Task> tasks;
    const int tile = query_tile(p);
    for (int b = 0; b < p.batch; ++b)
      for (int g = 0; g < p.heads_kv; ++g)
        for (std::int64_t r = 0; r < p.seq_lens[b]; r += tile)
          tasks.push_back({b, g, r, std::min<std::int64_t>(tile, p.seq_lens[b] - r)});
    run_tasks<T>(p, tasks, [&](int b, int g) { return blocks[b * p.heads_kv + g]; });
    return Status::success();
  }

  // Keys a chunk [s, e) attends to: the cache's window before s, then the chunk itself, as one
  // contiguous fp32 block of positions [first, e).
  template <class T>
  static Status gather_chunk_keys(const AttnParams& p, const KvCache& cache, int b, int g, std::int64_t s,
                                  std::int64_t e, std::vector<float>& k_buf, std::vector<float>& v_buf,
                                  KeyBlock& block) {
    const std::int64_t first = band_first_key(p.band, s);
    const int d = p.head_size;
    k_buf.resize(static_cast<std::size_t>(e - first) * d);
    v_buf.resize(k_buf.size());
    for (std::int64_t pos = first; pos < s; ++pos) {
      const std::int64_t slot = cache.slot_of(b, pos);
      if (cache.position_in(b, slot) != pos)
        return Status::failure("cpu: the cache does not hold position " + std::to_string(pos) + " of sequence " +
                               std::to_string(b));
      const std::size_t off = cache.offset(b, slot, g);
      cache_rows_to_fp32<T>(cache, cache.k, off, d, 1, d, p.k_descale, &k_buf[(pos - first) * d]);
      cache_rows_to_fp32<T>(cache, cache.v, off, d, 1, d, p.v_descale, &v_buf[(pos - first) * d]);
    }
    input_kv_to_fp32<T>(p, p.seq_offsets[b] + s, g, e - s, &k_buf[(s - first) * d], &v_buf[(s - first) * d]);
    block = {k_buf.data(), v_buf.data(), d, first, e - first};
    return Status::success();
  }

  template <class T>
  Status chunk_typed(const AttnParams& p, KvCache& cache, int chunk_index) const {
    std::vector<std::vector<float>> k_bufs(static_cast<std::size_t>(p.batch) * p.heads_kv), v_bufs(k_bufs.size());
    std::vector<KeyBlock> blocks(k_bufs.size());
    std::vector<cpu::amx::PackedKeys> packs(use_amx<T>(p) ? blocks.size() : 0);
    std::vector<Task> tasks;
    for (int b = 0; b < p.batch; ++b) {
      const std::int64_t s = chunk_begin(p, b, chunk_index), e = chunk_end(p, b, chunk_index);
      if (s >= e) continue;
      for (int g = 0; g < p.heads_kv; ++g) {
        const std::size_t u = static_cast<std::size_t>(b) * p.heads_kv + g;
        if (Status st = gather_chunk_keys<T>(p, cache, b, g, s, e, k_bufs[u], v_bufs[u], blocks[u]); !st.ok) return st;
        if (!packs.empty()) pack_for_amx(blocks[u], p.head_size, packs[u]);
        for (std::int64_t r = s; r < e; r += tuning_.query_tile)
          tasks.push_back({b, g, r, std::min<std::int64_t>(tuning_.query_tile, e - r)});
      }
    }
    run_tasks<T>(p, tasks, [&](int b, int g) { return blocks[b * p.heads_kv + g]; });
    for (int b = 0; b < p.batch; ++b) {
      const std::int64_t s = chunk_begin(p, b, chunk_index), e = chunk_end(p, b, chunk_index);
      if (s < e) write_rows_to_cache(p, cache, b, s, e);
    }
    return Status::success();
  }

  // Keys of one kv head in cache slots [t0, t1) of sequence b, for the query at position i: when every
  // slot holds a visible position (`all_visible`: a filled ring, a linear cache's window), the slots
  // are read in place (fp32) or converted as one strided block, with no per-slot work; otherwise
  // slot by slot, skipping empty and invisible ones. Returns the rows of `keys`/`values` filled.
  static bool slots_all_visible(const AttnParams& p, const KvCache& cache, int b, std::int64_t i, std::int64_t t0,
                                std::int64_t t1) {
    for (std::int64_t slot = t0; slot < t1; ++slot) {
      const std::int64_t pos = cache.position_in(b, slot);
      if (pos < 0 || !band_visible(p.band, i, pos)) return false;
    }
    return true;
  }

  template <class T>
  static std::int64_t decode_tile(const AttnParams& p, const KvCache& cache, int b, int g, std::int64_t i,
                                  std::int64_t t0, std::int64_t t1, bool all_visible, std::vector<float>& k_buf,
                                  std::vector<float>& v_buf, const float*& keys, const float*& values,
                                  std::int64_t& stride) {
    const int d = p.head_size;
    if (all_visible) {
      const std::size_t off = cache.offset(b, t0, g);
      const std::int64_t slot_stride = static_cast<std::int64_t>(cache.heads_kv) * d;
      const bool contiguous = cache.contiguous_slots(t0) >= t1 - t0;
      if constexpr (std::is_same_v<T, float>) {
        if (!is_fp8(cache.format) && contiguous) {
          keys = reinterpret_cast<const float*>(cache.k.data() + off);
          values = reinterpret_cast<const float*>(cache.v.data() + off);
          stride = slot_stride;
          return t1 - t0;
        }
      }
      k_buf.resize(static_cast<std::size_t>(t1 - t0) * d);
      v_buf.resize(k_buf.size());
      // Page by page in a paged cache: a run of slots is contiguous only within a page.
      for (std::int64_t a = t0; a < t1;) {
        const std::int64_t n = std::min(t1 - a, cache.contiguous_slots(a));
        const std::size_t at = cache.offset(b, a, g), row = static_cast<std::size_t>(a - t0) * d;
        cache_rows_to_fp32<T>(cache, cache.k, at, slot_stride, n, d, p.k_descale, &k_buf[row]);
        cache_rows_to_fp32<T>(cache, cache.v, at, slot_stride, n, d, p.v_descale, &v_buf[row]);
        a += n;
      }
      keys = k_buf.data();
      values = v_buf.data();
      stride = d;
      return t1 - t0;
    }
    k_buf.clear();
    v_buf.clear();
    for (std::int64_t slot = t0; slot < t1; ++slot) {
      const std::int64_t pos = cache.position_in(b, slot);
      if (pos < 0 || !band_visible(p.band, i, pos)) continue;
      const std::size_t off = cache.offset(b, slot, g);
      k_buf.resize(k_buf.size() + d);
      v_buf.resize(v_buf.size() + d);
      cache_rows_to_fp32<T>(cache, cache.k, off, d, 1, d, p.k_descale, &*(k_buf.end() - d));
      cache_rows_to_fp32<T>(cache, cache.v, off, d, 1, d, p.v_descale, &*(v_buf.end() - d));
    }
    keys = k_buf.data();
    values = v_buf.data();
    stride = d;
    return static_cast<std::int64_t>(k_buf.size()) / d;
  }

  // Decode: one query per sequence. The candidate slots of each sequence are split across threads
  // (flash-decoding); a task reads its slot range for every kv head, so the threads stream disjoint,
  // contiguous parts of the cache. Partial (max, sum, output) states are merged by log-sum-exp.
  template <class T>
  Status decode_typed(const AttnParams& p, KvCache& cache, int step) const {
    for (int b = 0; b < p.batch; ++b) {
      const std::int64_t i = prompt_len(p, b) + step;
      write_rows_to_cache(p, cache, b, i, i + 1);
    }
    const int group = p.heads_q / p.heads_kv;
    const int d = p.head_size;
    const int threads = omp_get_max_threads();
    // fp16/bf16 cache rows straight into the dot products (fused_kv.hpp) where the CPU has AVX2+F16C+FMA.
    const bool fused = !std::is_same_v<T, float> && !is_fp8(cache.format) && cpu::fused::available();
    const std::int64_t tile = decode_key_tile;
    // Enough splits that every thread has work, none smaller than one key tile.
    const int splits = static_cast<int>(std::max<std::int64_t>(
        1, std::min<std::int64_t>((2 * threads + p.batch - 1) / p.batch, (cache.slots + tile - 1) / tile)));
    struct Partial {
      Eigen::VectorXf max, sum;
      RowMatrix out;
    };
    std::vector<Partial> partials(static_cast<std::size_t>(p.batch) * splits * p.heads_kv);
    auto partial = [&](int b, int split, int g) -> Partial& {
      return partials[(static_cast<std::size_t>(b) * splits + split) * p.heads_kv + g];
    };
#pragma omp parallel
    {
      std::vector<float> q(static_cast<std::size_t>(group) * d * p.heads_kv), k_buf, v_buf;
      RowMatrix scores;
      std::vector<RowMatrix> head_scores(p.heads_kv);
      std::vector<cpu::SoftmaxState> states(p.heads_kv);
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t task = 0; task < static_cast<std::int64_t>(p.batch) * splits; ++task) {
        const int b = static_cast<int>(task / splits), split = static_cast<int>(task % splits);
        const std::int64_t i = prompt_len(p, b) + step;
        // Candidate slots: the whole ring, or the window of a linear or paged cache (slot = position);
        // this split's share in whole tiles.
        const bool by_position = cache.policy == CachePolicy::linear || cache.paged();
        const std::int64_t lo = by_position ? band_first_key(p.band, i) : 0;
        const std::int64_t hi = by_position ? i + 1 : cache.slots;
        const std::int64_t per = ((hi - lo + splits - 1) / splits + tile - 1) / tile * tile;
        const std::int64_t s0 = std::min(hi, lo + split * per), s1 = std::min(hi, s0 + per);
        for (int g = 0; g < p.heads_kv; ++g) {
          load_queries<T>(p, b, g, i, 1, p.scale, &q[static_cast<std::size_t>(g) * group * d]);
          states[g].reset(group, d);
        }
        // Tile-outer, kv-head-inner: a tile's slots hold every kv head contiguously, so the task
        // streams its part of the cache once, front to back.
        for (std::int64_t t0 = s0; t0 < s1; t0 += tile) {
          const std::int64_t t1 = std::min(s1, t0 + tile);
          const bool all_visible = slots_all_visible(p, cache, b, i, t0, t1);
          if (fused && all_visible) {
            fused_tile(p, cache, b, t0, t1, s1, q.data(), head_scores, states);
            continue;
          }
          for (int g = 0; g < p.heads_kv; ++g) {
            const float *keys = nullptr, *values = nullptr;
            std::int64_t stride = d;
            const std::int64_t n =
                decode_tile<T>(p, cache, b, g, i, t0, t1, all_visible, k_buf, v_buf, keys, values, stride);
            if (n == 0) continue;
            const Eigen::Map<const RowMatrix> queries(&q[static_cast<std::size_t>(g) * group * d], group, d);
            const cpu::ConstRowsView k(keys, n, d, Eigen::OuterStride<>(stride));
            const cpu::ConstRowsView v(values, n, d, Eigen::OuterStride<>(stride));
            scores.noalias() = queries * k.transpose();
            score_rule(p, g).cap(scores);
            states[g].update(scores, v);
          }
        }
        for (int g = 0; g < p.heads_kv; ++g) partial(b, split, g) = {states[g].max, states[g].sum, states[g].out};
      }
    }
    // Merge the splits of each (sequence, kv head) by log-sum-exp, in split order.
    for (int b = 0; b < p.batch; ++b)
      for (int g = 0; g < p.heads_kv; ++g) {
        cpu::SoftmaxState merged;
        merged.reset(group, d);
        for (int split = 0; split < splits; ++split)
          merged.merge(partial(b, split, g).max, partial(b, split, g).sum, partial(b, split, g).out);
        std::vector<float> o(static_cast<std::size_t>(group) * d);
        merged.finish(o.data(), score_rule(p, g), 1);
        store_outputs<T>(p, b, g, prompt_len(p, b) + step, 1, o.data());
      }
    return Status::success();
  }

  // Decode's visible cache slots [t0, t1), every kv head, read in place from fp16/bf16 storage:
  // scores by fused dot products, each head's softmax state rescaled, weights x value rows fused into
  // its output. Slots are walked in memory order, a block of them at a time and every kv head within
  // the block, so the cache streams front to back (rows of one kv head alone are 2 * Hkv * D bytes
  // apart, which neither the prefetchers nor L1's sets serve well); a block is contiguous within a
  // page. The walk asks for memory one block ahead throughout: the keys' last block for the values'
  // first, the values' last for the first keys of the task's next tile (slots [t1, s1) remain).
  static void fused_tile(const AttnParams& p, const KvCache& cache, int b, std::int64_t t0, std::int64_t t1,
                         std::int64_t s1, const float* q, std::vector<RowMatrix>& scores,
                         std::vector<cpu::SoftmaxState>& states) {
    const int group = p.heads_q / p.heads_kv, d = p.head_size;
    const std::int64_t n = t1 - t0, stride = static_cast<std::int64_t>(cache.heads_kv) * d;
    const bool bf16 = p.dtype == DType::bf16;
    auto rows = [&](const std::vector<unsigned char>& bytes, std::int64_t a, int g) {
      return reinterpret_cast<const std::uint16_t*>(bytes.data() + cache.offset(b, a, g));
    };
    // A block asked for ahead of its use, as every kv head's share of its bytes.
    struct Ahead {
      const unsigned char* from = nullptr;
      std::size_t share = 0;
      cpu::fused::Prefetch of_head(int g) const { return {from ? from + g * share : nullptr, share}; }
    };
    const std::size_t row_bytes = static_cast<std::size_t>(d) * cache.element_bytes();
    // The block of `bytes` (cache.k or cache.v) that starts at slot `a`, up to slot `end`.
    auto block_at = [&](const std::vector<unsigned char>& bytes, std::int64_t a, std::int64_t end) -> Ahead {
      if (a >= end) return {};
      const std::int64_t slots = std::min({end - a, cache.contiguous_slots(a), decode_slot_block});
      return {bytes.data() + cache.offset(b, a, 0), static_cast<std::size_t>(slots) * row_bytes};
    };
    // Calls f(first slot, slots, ahead) for blocks of at most decode_slot_block slots, none across a
    // page. The kernels ask for head g's share of `ahead` a line at a time as they consume their own
    // rows, so the next block's misses are in flight while this one computes (dut/README.md, decode);
    // the last block asks for `after`.
    auto blocks = [&](const std::vector<unsigned char>& bytes, const Ahead& after, auto&& f) {
      for (std::int64_t a = t0; a < t1;) {
        const std::int64_t m = std::min({t1 - a, cache.contiguous_slots(a), decode_slot_block});
        f(a, m, a + m < t1 ? block_at(bytes, a + m, t1) : after);
        a += m;
      }
    };
    for (int g = 0; g < p.heads_kv; ++g) scores[g].resize(group, n);
    blocks(cache.k, block_at(cache.v, t0, t1), [&](std::int64_t a, std::int64_t m, const Ahead& ahead) {
      for (int g = 0; g < p.heads_kv; ++g) {
        cpu::fused::Prefetch next = ahead.of_head(g);
        cpu::fused::dots(q + static_cast<std::size_t>(g) * group * d, group, d, rows(cache.k, a, g), stride, m, bf16,
                         scores[g].data() + (a - t0), n, next);
      }
    });
    for (int g = 0; g < p.heads_kv; ++g) {
      score_rule(p, g).cap(scores[g]);
      states[g].absorb(scores[g]);
    }
    blocks(cache.v, block_at(cache.k, t1, s1), [&](std::int64_t a, std::int64_t m, const Ahead& ahead) {
      for (int g = 0; g < p.heads_kv; ++g) {
        cpu::fused::Prefetch next = ahead.of_head(g);
        cpu::fused::accumulate(scores[g].data() + (a - t0), n, group, rows(cache.v, a, g), stride, m, d, bf16,
                               states[g].out.data(), next);
      }
    });
  }

  // Slots per block of fused_tile's walk: a block's K or V rows of every kv head (block * Hkv * D
  // elements; 32 KiB for 16 slots at Hkv 8, D 128, fp16) while each head reads its own. 16 read
  // faster than 8 and 32 (dut/README.md, decode).
  static constexpr std::int64_t decode_slot_block = 16;

  // Keys per decode tile: larger than prefill's, since one query row per head leaves the tile's
  // fixed costs (a small GEMM call, the softmax update) to be spread over more keys.
  static constexpr std::int64_t decode_key_tile = 128;

  CpuTuning tuning_;
};

}  // namespace

}  // namespace swa::dut

// This level's entry points (isa_levels.hpp); SWA_CPU_LEVEL names the level this object is built for.
SWA_CPU_DECLARE_LEVEL_ENTRIES(SWA_CPU_LEVEL)

swa::dut::Dut* SWA_CPU_LEVEL_ENTRY_NAME(SWA_CPU_LEVEL, make_dut)(const swa::dut::CpuTuning* tuning) {
  return new swa::dut::CpuDut(*tuning);
}

void SWA_CPU_LEVEL_ENTRY_NAME(SWA_CPU_LEVEL, sgemm)(int n, const float* a, const float* b, float* c) {
  using Matrix = Eigen::Map<const Eigen::MatrixXf>;
  Eigen::Map<Eigen::MatrixXf>(c, n, n).noalias() = Matrix(a, n, n) * Matrix(b, n, n);
}

const char* SWA_CPU_LEVEL_ENTRY_NAME(SWA_CPU_LEVEL, gemm_simd)() {
  // Eigen's own SimdInstructionSetsInUse() says "AVX" for AVX2 + FMA builds too; its macros do not.
#if defined(EIGEN_VECTORIZE_AVX512)
  return "avx512f";
#elif defined(EIGEN_VECTORIZE_AVX2) && defined(EIGEN_VECTORIZE_FMA)
  return "avx2+fma";
#elif defined(EIGEN_VECTORIZE_AVX)
  return "avx";
#elif defined(EIGEN_VECTORIZE_SSE2)
  return "sse2";
#else
  return "scalar";
#endif
}
