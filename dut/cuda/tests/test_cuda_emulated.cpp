#define BOOST_TEST_MODULE dut_cuda_emulated
// The CUDA kernels' own source, run on the CPU by the CTA emulator (cta_emulator.hpp), driven
// through prefill, chunked prefill and decode the way the CUDA DUT drives them, against the golden.
// The device cache the kernels write is compared byte for byte with the host cache after every call.
// Runs everywhere, so CI checks the kernels' logic on every commit; it cannot check the hardware.
#include "cta_emulator.hpp"  // first: the CUDA built-ins the kernel headers use

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <type_traits>

#include "cache_write_kernel.cuh"
#include "decode_kernel.cuh"
#include "dispatch.hpp"
#include "dut_case.hpp"
#include "prefill_mma_kernel.cuh"
#include "prefill_simt_kernel.cuh"

using namespace swa;
using namespace swa::dut;
using namespace swa::dut::cuda;
using test::Case;
using test::make_case;
using test::masked_case;

namespace {

struct Work {
  std::vector<std::int64_t> begin, end;
  std::vector<std::int32_t> prefix;
  std::int64_t longest = 0;

  // tile_rows: the prefill kernel's rows per CTA (prefill_tile_rows); the other kernels take no tiles.
  Work(std::vector<std::int64_t> b, std::vector<std::int64_t> e, int tile_rows = kPrefillTileRowsFinest)
      : begin(std::move(b)), end(std::move(e)) {
    prefix.assign(begin.size() + 1, 0);
    for (std::size_t s = 0; s < begin.size(); ++s) {
      prefix[s + 1] = prefix[s] + static_cast<std::int32_t>(tiles_for_rows(end[s] - begin[s], tile_rows));
      longest = std::max(longest, end[s] - begin[s]);
    }
  }
  RowWork rows() const { return {begin.data(), end.data(), prefix.data()}; }
  int tiles() const { return prefix.back(); }
};

template <class T, int D>
void prefill_kernel(const AttnParams& p, const Work& rows_of_call, const CacheView& c) {
  const Work w(rows_of_call.begin, rows_of_call.end, prefill_tile_rows(!std::is_same_v<T, float>, D));
  if (w.tiles() == 0) return;
  const RowWork rows = w.rows();
  if constexpr (std::is_same_v<T, float>) {
    emulator::launch(dim3(w.tiles(), p.heads_q), SimtTile<D>::kThreads, SimtTile<D>::kSmemBytes,
                     [&] { prefill_simt_kernel<D>(p, rows, c); });
  } else {
    emulator::launch(dim3(w.tiles(), p.heads_q), MmaTile<T, D>::kThreads, MmaTile<T, D>::kSmemBytes,
                     [&] { prefill_mma_kernel<T, D>(p, rows, c); });
  }
}

template <class T>
void cache_write(const AttnParams& p, const Work& w, const CacheView& c) {
  if (w.longest == 0) return;
  emulator::launch(dim3(static_cast<unsigned>(w.longest), p.heads_kv, p.batch), kCopyThreads, 0,
                   [&] { cache_write_kernel<T>(p, c, w.begin.data(), w.end.data()); });
}

// The split kernel the CUDA DUT launches for p: tensor cores with `mma_stages` stages of tiles (3
// where the device allows their shared memory, else 2: decode.cu), or CUDA cores.
template <class T, int D>
void decode_kernels(const AttnParams& p, const CacheView& c, const Work& w, int splits, int mma_stages) {
  std::vector<float> partials(static_cast<std::size_t>(p.batch) * p.heads_q * splits * (D + 2));
  std::vector<unsigned> arrivals(static_cast<std::size_t>(decode_arrival_counters(p)), 0u);
  const bool fp8 = is_fp8(p.kv_format);
  const auto run = [&](int shared_bytes, auto kernel) {
    emulator::launch(decode_grid(p, splits), kDecodeThreads, shared_bytes,
                     [&] { kernel(p, c, w.begin.data(), splits, partials.data(), arrivals.data()); });
  };
  bool done = false;
  if constexpr (kDecodeMmaCompiled<T, D>) {
    if (decode_on_tensor_cores<T, D>(fp8)) {
      if (mma_stages == kMmaDecodeDeepStages)
        run(MmaDecodeLayout<T, D, kMmaDecodeDeepStages>::kSharedBytes, decode_mma_split_kernel<T, D, kMmaDecodeDeepStages>);
      else
        run(MmaDecodeLayout<T, D, kDecodeStages>::kSharedBytes, decode_mma_split_kernel<T, D, kDecodeStages>);
      done = true;
    }
  }
  if (!done) run(simt_decode_shared_bytes<T, D>(fp8), decode_split_kernel<T, D>);
  BOOST_TEST(std::count(arrivals.begin(), arrivals.end(), 0u) == static_cast<std::ptrdiff_t>(arrivals.size()),
             "the last split of every head chunk resets its counter");
}

// The CUDA DUT's schedule with host memory standing in for device memory, and a separate "device"
// cache that only the emulated kernels write.
class EmulatedCudaDut final : public Dut {
 public:
  explicit EmulatedCudaDut(int mma_decode_stages = kMmaDecodeDeepStages) : mma_decode_stages_(mma_decode_stages) {}
  std::string name() const override { return "cuda-emulated"; }
  Support supports(const AttnParams&) const override { return Support::yes(); }

  Status prefill(const AttnParams& p) override {
    const Work w(std::vector<std::int64_t>(p.batch, 0), std::vector<std::int64_t>(p.seq_lens, p.seq_lens + p.batch));
    dispatch(p, [&](auto tag, auto d) { prefill_kernel<typename decltype(tag)::type, decltype(d)::value>(p, w, {}); });
    return Status::success();
  }

  Status chunked_prefill(const AttnParams& p, KvCache& cache, int chunk_index) override {
    std::vector<std::int64_t> begin(p.batch), end(p.batch);
    for (int b = 0; b < p.batch; ++b) {
      begin[b] = chunk_begin(p, b, chunk_index);
      end[b] = chunk_end(p, b, chunk_index);
    }
    const Work w(begin, end);
    if (chunk_index == 0) device_k_ = cache.k, device_v_ = cache.v;
    for (int b = 0; b < p.batch; ++b)
      if (begin[b] < end[b]) write_rows_to_cache(p, cache, b, begin[b], end[b]);
    const CacheView view = device_view(cache);
    dispatch(p, [&](auto tag, auto d) {
      using T = typename decltype(tag)::type;
      prefill_kernel<T, decltype(d)::value>(p, w, view);
      cache_write<T>(p, w, view);
    });
    return same_cache(cache);
  }

  Status decode_step(const AttnParams& p, KvCache& cache, int step) override {
    std::vector<std::int64_t> begin(p.batch), end(p.batch);
    std::int64_t longest = 0;
    for (int b = 0; b < p.batch; ++b) {
      begin[b] = prompt_len(p, b) + step;
      end[b] = begin[b] + 1;
      write_rows_to_cache(p, cache, b, begin[b], end[b]);
      const KeyRange r = decode_slot_range(cache.policy, cache.slots, p.band, begin[b]);
      longest = std::max(longest, r.end - r.first);
    }
    const Work w(begin, end);
    const CacheView view = device_view(cache);
    const int splits = decode_split_count(longest, decode_ctas_per_split(p), 8 * 4);  // 8 "SMs" of 4 CTAs: several splits
    dispatch(p, [&](auto tag, auto d) {
      set_free_slots(cache, kPoison);
      poison_new_rows(cache, begin);
      decode_kernels<typename decltype(tag)::type, decltype(d)::value>(p, view, w, splits, mma_decode_stages_);  // writes the new rows
      set_free_slots(cache, kRestore);
    });
    return same_cache(cache);
  }

 private:
  template <class F>
  static void dispatch(const AttnParams& p, F&& f) {
    with_storage_type(p.dtype, [&](auto tag) {
      BOOST_REQUIRE(with_head_size(p.head_size, [&](auto d) { f(tag, d); }));
    });
  }

  CacheView device_view(const KvCache& cache) {
    return {cache.policy, cache.slots, cache.heads_kv, cache.head_size, device_k_.data(), device_v_.data(),
            cache.geometry.data(), cache.page_size, cache.table_width,
            cache.paged() ? cache.page_table.data() : nullptr};
  }

  // Decode reads whole tiles of slots, some holding no position yet (a ring not yet full): their
  // bytes become NaN while the decode kernels run, so a kernel that lets such a slot reach the
  // output, even times a zero weight, fails. (Not for a paged cache, whose rows are addressed by page.)
  enum FreeSlots { kPoison, kRestore };
  void set_free_slots(const KvCache& cache, FreeSlots what) {
    if (cache.paged()) return;
    const std::size_t row = cache.offset(0, 1, 0);  // one slot's bytes, every kv head
    for (int b = 0; b < static_cast<int>(cache.geometry.size()); ++b)
      for (std::int64_t slot = 0; slot < cache.slots; ++slot) {
        if (cache.position_in(b, slot) >= 0) continue;
        const std::size_t at = cache.offset(b, slot, 0);
        if (what == kPoison) {
          std::fill_n(device_k_.begin() + at, row, 0xFF);
          std::fill_n(device_v_.begin() + at, row, 0xFF);
        } else {
          std::copy_n(cache.k.begin() + at, row, device_k_.begin() + at);
          std::copy_n(cache.v.begin() + at, row, device_v_.begin() + at);
        }
      }
  }

  // The decode launch writes each sequence's new row into its slot: until then the device slot
  // holds NaN, so a CTA that reads the slot instead of the new row in its registers fails, and so
  // does a launch that leaves a row unwritten (same_cache).
  void poison_new_rows(const KvCache& cache, const std::vector<std::int64_t>& positions) {
    const std::size_t row = static_cast<std::size_t>(cache.heads_kv) * cache.head_size * cache.element_bytes();
    for (int b = 0; b < static_cast<int>(positions.size()); ++b) {
      const std::int64_t slot = cache.slot_of(b, positions[b]);
      if (slot < 0 || cache.position_in(b, slot) != positions[b]) continue;  // the cache does not store it
      const std::size_t at = cache.offset(b, slot, 0);
      std::fill_n(device_k_.begin() + at, row, 0xFF);
      std::fill_n(device_v_.begin() + at, row, 0xFF);
    }
  }

  Status same_cache(const KvCache& cache) const {
    if (device_k_ != cache.k || device_v_ != cache.v)
      return Status::failure("the kernels' cache differs from the host's in-order write");
    return Status::success();
  }

  int mma_decode_stages_;
  std::vector<unsigned char> device_k_, device_v_;
};

std::string emulated_verdict(Case& c, int mma_decode_stages = kMmaDecodeDeepStages) {
  EmulatedCudaDut dut(mma_decode_stages);
  return test::verdict(dut, c);
}

double emulated_error(Case& c) {
  EmulatedCudaDut dut;
  return test::relative_error(dut, c);
}

}  // namespace

namespace utf = boost::unit_test;

// The CI set (label "ci": every kernel, code path and head size once, a few minutes on 2 cores)
// and the exhaustive set (every case; `scripts/test.sh -L exhaustive`).

BOOST_AUTO_TEST_CASE(tensor_core_prefill_every_head_size_without_bank_conflicts, *utf::label("ci")) {
  // Every head size through the tensor-core prefill (fp16 and bf16 alternating), ragged sequences
  // whose band cuts the 64- and 32-key tiles. The emulator counts the shared-memory wavefronts of
  // the kernel's ldmatrix reads and cp.async writes: none beyond the minimum, for the swizzled rows
  // (D a multiple of 64) and the padded ones (D 80, 96, 160) alike.
  int i = 0;
  for (int d : kHeadSizes) {
    const DType dt = i++ % 2 ? DType::bf16 : DType::fp16;
    Case c = make_case({130, 1, 67}, 2, 1, d, 45, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
    emulator::reset_shared_traffic();
    BOOST_TEST(emulated_verdict(c) == "pass", "D=" << d << " " << dtype_name(dt));
    const emulator::SharedTraffic t = emulator::shared_traffic();
    BOOST_TEST_MESSAGE("D=" << d << ": ldmatrix " << t.ldmatrix_wavefronts << " wavefronts (minimum " << t.ldmatrix_minimum
                            << "), cp.async " << t.copy_wavefronts << " (minimum " << t.copy_minimum << ")");
    BOOST_TEST(t.ldmatrix_minimum > 0, "D=" << d << ": the prefill reads shared memory through ldmatrix");
    BOOST_TEST(t.copy_minimum > 0, "D=" << d << ": the prefill fills shared memory through cp.async");
    BOOST_TEST(t.ldmatrix_wavefronts == t.ldmatrix_minimum, "D=" << d << ": ldmatrix bank conflicts");
    BOOST_TEST(t.copy_wavefronts == t.copy_minimum, "D=" << d << ": cp.async bank conflicts");
  }
}

BOOST_AUTO_TEST_CASE(tensor_core_prefill_tiles_inside_the_band, *utf::label("ci")) {
  // The cases above are too short for a 128 x 64 tile to lie wholly inside the band, and such tiles
  // take the kernel's short path (scale only: no mask, no cap); the long path runs on every tile
  // once a soft cap is set. S 300 and W 260 give whole tiles (rows 128-255, keys 0-127), edge
  // tiles and a ragged last tile, at the benchmark's head size and the smallest.
  Case fp16 = make_case({300, 70}, 2, 1, 128, 260, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::fp16);
  BOOST_TEST(emulated_verdict(fp16) == "pass", "D 128 fp16, short path on inner tiles");
  Case bf16 = make_case({300, 70}, 2, 1, 64, 260, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::bf16);
  BOOST_TEST(emulated_verdict(bf16) == "pass", "D 64 bf16, short path on inner tiles");
  Case capped = make_case({300, 70}, 2, 1, 64, 260, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::fp16, 3.0);
  BOOST_TEST(emulated_verdict(test::with_semantics(capped, 30.f, false)) == "pass", "D 64 fp16 capped, long path everywhere");
}

BOOST_AUTO_TEST_CASE(every_kernel_path_once, *utf::label("ci")) {
  // One small case per path the exhaustive cases below take many times: the fp32 prefill, chunked
  // prefill through both rings (C < W and C > W, tensor-core and fp32), split decode through the
  // linear cache with a GQA group of 6, gpt-oss / Gemma 2 / two-sided score semantics, FP8 codes in
  // prefill, chunks and decode, and an ATB compressed mask.
  Case fp32 = make_case({130, 1, 67}, 2, 1, 64, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::fp32);
  BOOST_TEST(emulated_verdict(fp32) == "pass", "fp32 prefill");
  Case lt = make_case({60, 9}, 2, 1, 64, 20, RunMode::chunked_prefill, CachePolicy::ring_modulo, 7, 0, DType::fp16);
  BOOST_TEST(emulated_verdict(lt) == "pass", "chunked ring-modulo C<W fp16");
  Case gt = make_case({100, 40}, 2, 1, 64, 20, RunMode::chunked_prefill, CachePolicy::ring_compact, 33, 0, DType::fp32);
  BOOST_TEST(emulated_verdict(gt) == "pass", "chunked ring-compact C>W fp32");
  Case dec = make_case({150, 20}, 6, 1, 64, 90, RunMode::decode, CachePolicy::linear, 70, 2, DType::bf16, 3.0);
  BOOST_TEST(emulated_verdict(test::with_semantics(dec, 5.f, true)) == "pass", "decode linear GQA 6 bf16, cap and sinks");
  Case two = make_case({130, 1, 67}, 2, 1, 64, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::bf16, 3.0);
  BOOST_TEST(emulated_verdict(test::with_semantics(two, 50.f, true, 9)) == "pass", "prefill bf16 two-sided, cap and sinks");
  Case fp8 = make_case({130, 1, 67}, 2, 1, 64, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, DType::fp16);
  BOOST_TEST(emulated_verdict(test::with_fp8(fp8, KvFormat::fp8_e4m3)) == "pass", "fp8-e4m3 prefill fp16");
  Case fp8_chunks = make_case({60, 9}, 2, 1, 64, 20, RunMode::decode, CachePolicy::ring_compact, 7, 2, DType::bf16);
  BOOST_TEST(emulated_verdict(test::with_fp8(fp8_chunks, KvFormat::fp8_e5m2)) == "pass", "fp8-e5m2 chunks and decode");
  std::vector<float> mask;
  Case masked = masked_case(MaskFormat::swa_compress, mask, 129, 64);
  BOOST_TEST(emulated_verdict(masked) == "pass", "swa-compress mask");
}

BOOST_AUTO_TEST_CASE(tensor_core_and_fp32_prefill_match_the_golden) {
  for (DType dt : kAllDTypes)
    for (auto [d, w] : {std::pair{64, 17}, std::pair{64, 1000}, std::pair{160, 40}}) {  // 64- and 32-key tiles
      Case c = make_case({130, 1, 67}, 4, 2, d, w, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
      BOOST_TEST(emulated_verdict(c) == "pass", dtype_name(dt) << " D=" << d << " W=" << w);
    }
}

// The rings and the linear cache here; the paged cache in paged_cache_through_every_kernel, on
// smaller cases (the emulator is slow: the test's time limit).
BOOST_AUTO_TEST_CASE(chunked_prefill_reads_and_writes_every_cache) {
  for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::ring_compact, CachePolicy::linear})
    for (DType dt : {DType::fp16, DType::fp32}) {
      Case gt = make_case({100, 40}, 4, 2, 64, 20, RunMode::chunked_prefill, cache, 33, 0, dt);  // C > W
      BOOST_TEST(emulated_verdict(gt) == "pass", cache_name(cache) << " C>W " << dtype_name(dt));
      if (dt == DType::fp32) continue;
      Case lt = make_case({60, 9}, 4, 2, 64, 20, RunMode::chunked_prefill, cache, 7, 0, dt);  // wraps inside chunks
      BOOST_TEST(emulated_verdict(lt) == "pass", cache_name(cache) << " C<W " << dtype_name(dt));
    }
}

BOOST_AUTO_TEST_CASE(split_decode_matches_the_golden_through_every_cache) {
  for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::ring_compact, CachePolicy::linear})
    for (DType dt : {DType::bf16, DType::fp32}) {
      Case dec = make_case({240, 30}, 4, 2, 80, 200, RunMode::decode, cache, 100, 3, dt);
      BOOST_TEST(emulated_verdict(dec) == "pass", cache_name(cache) << " " << dtype_name(dt));
    }
}

BOOST_AUTO_TEST_CASE(two_stage_tensor_core_decode_where_deep_tiles_do_not_fit) {
  // GPUs that let a CTA take under 104 KB (sm_86, sm_89) run the tensor-core decode with two stages
  // of tiles instead of three: the same kernel source, a shallower pipeline.
  for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::linear})
    for (DType dt : {DType::fp16, DType::bf16}) {
      Case dec = make_case({240, 30}, 4, 2, 128, 200, RunMode::decode, cache, 100, 3, dt);
      BOOST_TEST(emulated_verdict(dec, kDecodeStages) == "pass", cache_name(cache) << " " << dtype_name(dt));
    }
}

BOOST_AUTO_TEST_CASE(decode_splits_shorter_than_the_copy_pipeline, *utf::label("ci")) {
  // A window of 40 keys is one tile a split, fewer than the stages of tiles copied ahead: the tile
  // stream still waits for the tile it folds (the emulator lands copies only at their waits).
  for (int stages : {kMmaDecodeDeepStages, kDecodeStages})
    for (DType dt : {DType::fp16, DType::fp32}) {
      Case dec = make_case({150, 20}, 4, 2, 64, 40, RunMode::decode, CachePolicy::linear, 70, 2, dt);
      BOOST_TEST(emulated_verdict(dec, stages) == "pass", stages << " stages " << dtype_name(dt));
    }
}

BOOST_AUTO_TEST_CASE(split_decode_shares_kv_rows_across_any_gqa_group) {
  // A CTA serves up to kHeadsPerCta q heads of one kv head: groups of 6 (a full chunk and a half-empty
  // one), 8 (two full ones) and 1 (MHA: one head, three empty), each with two splits of 150 slots.
  for (auto [hq, hkv] : {std::pair{12, 2}, std::pair{8, 1}, std::pair{3, 3}})
    for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::linear}) {
      Case dec = make_case({400, 30}, hq, hkv, 64, 300, RunMode::decode, cache, 200, 2, DType::bf16);
      BOOST_TEST(emulated_verdict(dec) == "pass", "Hq " << hq << " Hkv " << hkv << " " << cache_name(cache));
    }
}

BOOST_AUTO_TEST_CASE(split_decode_tile_layouts_of_large_and_odd_head_sizes) {
  // fp32 rows at D >= 192 take one shared-memory stage, the rest two; at D = 80 the lanes' column
  // pairs do not cover every lane.
  for (int d : {80, 192, 256})
    for (DType dt : {DType::fp32, DType::fp16}) {
      Case dec = make_case({150, 20}, 4, 2, d, 90, RunMode::decode, CachePolicy::linear, 70, 2, dt);
      BOOST_TEST(emulated_verdict(dec) == "pass", "D=" << d << " " << dtype_name(dt));
    }
}

BOOST_AUTO_TEST_CASE(masks_are_read_tile_by_tile) {
  std::vector<float> mask;
  for (MaskFormat f : {MaskFormat::swa_norm, MaskFormat::swa_compress}) {
    Case c = masked_case(f, mask, 129, 64);
    BOOST_TEST(emulated_verdict(c) == "pass", mask_format_name(f));
    Case broken = masked_case(f, mask, 129, 64);
    const std::int64_t row = f == MaskFormat::swa_norm ? 650 : 100, col = f == MaskFormat::swa_norm ? 649 : 50;
    mask[row * broken.p.mask_rows + col] = -65536.f;
    BOOST_TEST(emulated_error(broken) > 1e-3, mask_format_name(f) << " corrupted");
  }
}

BOOST_AUTO_TEST_CASE(sinks_soft_cap_and_two_sided_windows) {
  // Every kernel (fp32 SIMT and fp16/bf16 tensor-core prefill, chunked prefill through the cache,
  // split decode) with the score semantics of gpt-oss (sinks), Gemma 2 (soft-cap) and encoder-style
  // local attention (two-sided window). Large logits (sigma 3) so that the caps bend the scores.
  for (DType dt : kAllDTypes)
    for (auto [cap, sinks] : {std::pair{5.f, false}, std::pair{50.f, true}}) {
      Case pre = make_case({130, 1, 67}, 4, 2, 64, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt, 3.0);
      BOOST_TEST(emulated_verdict(test::with_semantics(pre, cap, sinks)) == "pass",
                 "prefill " << dtype_name(dt) << " cap=" << cap << " sinks=" << sinks);
    }
  for (DType dt : {DType::fp16, DType::fp32}) {
    Case chunked = make_case({60, 9}, 4, 2, 64, 20, RunMode::chunked_prefill, CachePolicy::ring_compact, 7, 0, dt, 3.0);
    BOOST_TEST(emulated_verdict(test::with_semantics(chunked, 5.f, true)) == "pass", "chunked " << dtype_name(dt));
  }
  for (DType dt : {DType::bf16, DType::fp32}) {
    Case dec = make_case({240, 30}, 4, 2, 80, 200, RunMode::decode, CachePolicy::ring_modulo, 100, 3, dt, 3.0);
    BOOST_TEST(emulated_verdict(test::with_semantics(dec, 5.f, true)) == "pass", "decode " << dtype_name(dt));
  }
  for (DType dt : {DType::fp32, DType::bf16}) {
    Case two = make_case({130, 1, 67}, 4, 2, 64, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
    BOOST_TEST(emulated_verdict(test::with_semantics(two, 0.f, true, 9)) == "pass", "two-sided " << dtype_name(dt));
  }
}

BOOST_AUTO_TEST_CASE(fp8_kv_through_every_kernel_and_cache) {
  // FP8 K/V: the fp32 SIMT and fp16/bf16 tensor-core prefill quantising their inputs, chunked
  // prefill reading FP8 codes from the cache, the cache write quantising (its bytes must equal the
  // host writer's, same_cache), and split decode decoding codes. The default descales saturate.
  // Formats and dtypes alternate across the caches: the emulator is slow (the test's time limit).
  for (KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2})
    for (DType dt : {DType::bf16, DType::fp32}) {
      Case pre = make_case({130, 1, 67}, 4, 2, 64, 17, RunMode::prefill, CachePolicy::ring_modulo, 0, 0, dt);
      BOOST_TEST(emulated_verdict(test::with_fp8(pre, f)) == "pass", kv_format_name(f) << " prefill " << dtype_name(dt));
    }
  int i = 0;
  for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::ring_compact, CachePolicy::linear}) {
    const KvFormat f = i % 2 ? KvFormat::fp8_e5m2 : KvFormat::fp8_e4m3;
    const DType dt = i++ == 1 ? DType::fp32 : DType::fp16;
    Case chunked = make_case({60, 9}, 4, 2, 64, 20, RunMode::chunked_prefill, cache, 7, 0, dt);
    BOOST_TEST(emulated_verdict(test::with_fp8(chunked, f)) == "pass",
               kv_format_name(f) << " chunked " << cache_name(cache) << " " << dtype_name(dt));
    const KvFormat g = f == KvFormat::fp8_e4m3 ? KvFormat::fp8_e5m2 : KvFormat::fp8_e4m3;
    Case dec = make_case({150, 30}, 4, 2, 64, 120, RunMode::decode, cache, 100, 2, cache == CachePolicy::linear ? DType::fp32 : DType::bf16);
    BOOST_TEST(emulated_verdict(test::with_fp8(dec, g)) == "pass", kv_format_name(g) << " decode " << cache_name(cache));
  }
}

BOOST_AUTO_TEST_CASE(paged_cache_through_every_kernel, *utf::label("ci")) {
  // Chunked prefill reading earlier keys through the page table (tensor-core fp16 and SIMT fp32),
  // the cache write into the pages the harness took (its bytes must equal the host writer's,
  // same_cache), split decode across pages; pages of 5 and 16 cut the 64- and 32-key tiles, the batch
  // recycles pages, and a chunk longer than the window leaves rows unstored.
  for (auto [dt, chunk, page] : {std::tuple{DType::fp16, 7, 5}, std::tuple{DType::fp32, 33, 16}}) {
    Case c = make_case({60, 9}, 4, 2, 64, 20, RunMode::chunked_prefill, CachePolicy::paged, chunk, 0, dt);
    BOOST_TEST(emulated_verdict(test::with_pages(c, page)) == "pass", "chunked " << dtype_name(dt) << " page " << page);
  }
  Case dec = make_case({150, 30}, 4, 2, 80, 120, RunMode::decode, CachePolicy::paged, 100, 3, DType::bf16);
  BOOST_TEST(emulated_verdict(test::with_pages(dec, 16)) == "pass", "decode bf16 page 16");
  Case fp8 = make_case({60, 9}, 4, 2, 64, 20, RunMode::decode, CachePolicy::paged, 7, 2, DType::fp16);
  BOOST_TEST(emulated_verdict(test::with_fp8(test::with_pages(fp8, 3), KvFormat::fp8_e4m3)) == "pass", "decode fp8 page 3");
}
