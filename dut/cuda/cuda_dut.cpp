// Host side of the CUDA DUT: per call, the rows it needs go to the device, the kernels run on one
// stream between two events, and the rows it computed come back. The KV cache has a device mirror
// that is re-uploaded whenever the host cache is not the one the mirror last matched.
#include "swa/dut/cuda_dut.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "dispatch.hpp"
#include "launch.hpp"
#include "stream_hold.hpp"

namespace swa::dut {
namespace cuda {
namespace {

// Elements a [rows, heads, head_size] view with these strides spans.
std::int64_t view_elements(std::int64_t rows, int heads, std::int64_t row_stride, std::int64_t head_stride, int d) {
  return rows > 0 ? (rows - 1) * row_stride + (heads - 1) * head_stride + d : 0;
}

// Rows [begin[b], end[b]) of every sequence one call reads and writes.
struct CallRows {
  std::vector<std::int64_t> begin, end;
  std::int64_t first_row = 0, last_row = 0;  // packed rows [first_row, last_row) covering them all
  std::int64_t longest = 0;

  CallRows(const AttnParams& p, std::vector<std::int64_t> b, std::vector<std::int64_t> e)
      : begin(std::move(b)), end(std::move(e)) {
    bool any = false;
    for (int s = 0; s < p.batch; ++s) {
      if (begin[s] >= end[s]) continue;
      const std::int64_t lo = p.seq_offsets[s] + begin[s], hi = p.seq_offsets[s] + end[s];
      first_row = any ? std::min(first_row, lo) : lo;
      last_row = any ? std::max(last_row, hi) : hi;
      longest = std::max(longest, end[s] - begin[s]);
      any = true;
    }
  }
  bool empty() const { return last_row <= first_row; }
};

struct MirrorState {
  bool valid = false;
  const unsigned char* data = nullptr;
  std::size_t bytes = 0;
  CachePolicy policy = CachePolicy::linear;
  DType dtype = DType::fp32;
  std::vector<std::int64_t> written;
  std::vector<RingGeometry> geometry;

  bool matches(const KvCache& c) const {
    if (!valid || data != c.k.data() || bytes != c.k.size() || policy != c.policy || dtype != c.dtype ||
        written != c.tokens_written || geometry.size() != c.geometry.size())
      return false;
    for (std::size_t b = 0; b < geometry.size(); ++b)
      if (geometry[b].capacity != c.geometry[b].capacity || geometry[b].base != c.geometry[b].base) return false;
    return true;
  }
  void record(const KvCache& c) {
    valid = true;
    data = c.k.data();
    bytes = c.k.size();
    policy = c.policy;
    dtype = c.dtype;
    written = c.tokens_written;
    geometry = c.geometry;
  }
};

class CudaDut final : public Dut {
 public:
  CudaDut() : problem_(cuda_device_problem()) {}
  ~CudaDut() override {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }

  Support supports(const AttnParams& p) const override {
    if (!problem_.empty()) return Support::skip(problem_);
    if (!supported_head_size(p.head_size))
      return Support::skip("head size " + std::to_string(p.head_size) +
                           " has no compiled kernel (64|80|96|128|160|192|256)");
    if (p.mask_format == MaskFormat::swa_compress && p.mode == RunMode::chunked_prefill)
      return Support::skip("the compressed mask is read on tiles aligned to its block from position 0; "
                           "chunked prefill starts tiles at chunk boundaries");
    if (p.mask_format != MaskFormat::none && !p.mask) return Support::skip("mask format set but no mask tensor");
    for (std::int64_t stride : {p.q_row_stride, p.q_head_stride, p.k_row_stride, p.k_head_stride, p.v_row_stride,
                                p.v_head_stride, p.out_row_stride, p.out_head_stride})
      if (stride % 8 != 0) return Support::skip("strides must be multiples of 8 elements (16-byte vector loads)");
    if (p.batch > 65535 || p.heads_q > 65535) return Support::skip("batch and heads_q must be <= 65535 (grid limits)");
    return Support::yes();
  }

  Status prefill(const AttnParams& p) override {
    return guarded("prefill", [&] {
      CallRows rows(p, std::vector<std::int64_t>(p.batch, 0), std::vector<std::int64_t>(p.seq_lens, p.seq_lens + p.batch));
      const AttnParams d = to_device(p, rows);
      const int tiles = upload_row_work(p, rows);
      timed([&] { launch_prefill_typed(d, CacheView{}, tiles); });
      download_outputs(p, rows);
    });
  }

  Status chunked_prefill(const AttnParams& p, KvCache& cache, int chunk_index) override {
    std::vector<std::int64_t> begin(p.batch), end(p.batch);
    for (int b = 0; b < p.batch; ++b) {
      begin[b] = chunk_begin(p, b, chunk_index);
      end[b] = chunk_end(p, b, chunk_index);
      if (begin[b] >= end[b]) continue;
      for (std::int64_t pos = band_first_key(p.band, begin[b]); pos < begin[b]; ++pos)
        if (cache.position_in(b, cache.slot_of(b, pos)) != pos)
          return Status::failure("cuda: the cache does not hold position " + std::to_string(pos) + " of sequence " +
                                 std::to_string(b));
    }
    return guarded("chunked_prefill", [&] {
      CallRows rows(p, begin, end);
      const AttnParams d = to_device(p, rows);
      mirror_cache(cache, chunk_index == 0);
      for (int b = 0; b < p.batch; ++b)
        if (begin[b] < end[b]) advance_cache_metadata(cache, b, begin[b], end[b]);
      const CacheView view = cache_view(cache);
      const int tiles = upload_row_work(p, rows);
      timed([&] {
        launch_prefill_typed(d, view, tiles);
        with_storage_type(p.dtype, [&](auto tag) {
          launch_cache_write<typename decltype(tag)::type>(d, view, row_begin_.as<std::int64_t>(),
                                                          row_end_.as<std::int64_t>(), rows.longest, stream_);
        });
      });
      download_outputs(p, rows);
      download_cache(cache);
      mirror_.record(cache);
    });
  }

  Status decode_step(const AttnParams& p, KvCache& cache, int step) override {
    return guarded("decode_step", [&] {
      std::vector<std::int64_t> begin(p.batch), end(p.batch);
      for (int b = 0; b < p.batch; ++b) {
        begin[b] = prompt_len(p, b) + step;
        end[b] = begin[b] + 1;
      }
      CallRows rows(p, begin, end);
      const AttnParams d = to_device(p, rows);
      mirror_cache(cache, false);
      std::int64_t longest = 0;
      for (int b = 0; b < p.batch; ++b) {
        advance_cache_metadata(cache, b, begin[b], end[b]);
        const KeyRange r = decode_slot_range(cache.policy, cache.slots, p.band, begin[b]);
        longest = std::max(longest, r.end - r.first);
      }
      const CacheView view = cache_view(cache);
      upload_row_work(p, rows);
      const int resident = with_storage_type(p.dtype, [&](auto tag) {
        return multiprocessors_ * decode_ctas_per_multiprocessor<typename decltype(tag)::type>(p);
      });
      const int splits = decode_split_count(longest, decode_ctas_per_split(p), resident);
      float* partials = static_cast<float*>(
          partials_.reserve(sizeof(float) * p.batch * p.heads_q * splits * (p.head_size + 2)));
      // The split kernel's counters return to zero at the end of every launch; they are zeroed only when new.
      auto* arrivals = static_cast<unsigned*>(arrivals_.reserve_zeroed(sizeof(unsigned) * decode_arrival_counters(p), stream_));
      timed([&] {
        with_storage_type(p.dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          launch_decode<T>(d, view, row_begin_.as<std::int64_t>(), splits, partials, arrivals, stream_);
        });
      });
      download_outputs(p, rows);
      download_cache(cache);
      mirror_.record(cache);
    });
  }

  std::optional<double> last_kernel_ms() const override { return last_ms_; }

  Traits traits() const override {
    Traits t;
    t.query_tile = kPrefillTileRowsFinest;  // prefill and chunks (every tile starts on a multiple); decode splits the keys
    for (int d = 1; d <= 256; ++d)
      if (supported_head_size(d)) t.head_sizes.push_back(d);
    t.times_own_kernels = true;
    return t;
  }

 private:
  // Runs one entry point; a CUDA or allocation error becomes this DUT's failure, never a crash.
  template <class F>
  Status guarded(const char* what, F&& body) {
    last_ms_.reset();
    if (!problem_.empty()) return Status::failure("cuda: " + problem_);
    try {
      ensure_stream();
      body();
      return Status::success();
    } catch (const std::exception& e) {
      mirror_.valid = false;
      if (stream_) cudaStreamSynchronize(stream_);
      cudaGetLastError();  // clears a non-sticky error so the next scenario starts clean
      return Status::failure(std::string("cuda ") + what + ": " + e.what());
    }
  }

  void ensure_stream() {
    check(cudaSetDevice(0), "cudaSetDevice");
    if (hold_) return;  // made last, so a failure above is retried on the next call
    if (!stream_) check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!start_) check(cudaEventCreate(&start_), "cudaEventCreate");
    if (!stop_) check(cudaEventCreate(&stop_), "cudaEventCreate");
    check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
    hold_.emplace();
  }

  // The GPU time of the launches `kernels` enqueues, without the host's launch latency (stream_hold.hpp).
  template <class F>
  void timed(F&& kernels) {
    hold_->hold(stream_);
    struct Release {
      StreamHold& hold;
      ~Release() { hold.release(); }  // also when a launch throws: the stream must not wait for the limit
    } release{*hold_};
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    kernels();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    hold_->release();
    check(cudaStreamSynchronize(stream_), "kernel execution (cudaStreamSynchronize)");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    last_ms_ = ms;
  }

  void launch_prefill_typed(const AttnParams& d, const CacheView& view, int tiles) {
    with_storage_type(d.dtype, [&](auto tag) {
      launch_prefill<typename decltype(tag)::type>(d, RowWork{row_begin_.as<std::int64_t>(), row_end_.as<std::int64_t>(),
                                                              tile_prefix_.as<std::int32_t>()},
                                                   view, tiles, stream_);
    });
  }

  // Uploads the packed rows the call touches (Q, K, V; the output poisoned with NaN) and returns
  // p with device pointers, its sequence offsets rebased onto the uploaded block.
  AttnParams to_device(const AttnParams& p, const CallRows& rows) {
    AttnParams d = p;
    const std::size_t elem = dtype_bytes(p.dtype);
    const std::int64_t n = rows.last_row - rows.first_row;
    auto upload_view = [&](DeviceBuffer& buf, const void* host, std::int64_t row_stride, std::int64_t head_stride,
                           int heads) {
      const auto* src = static_cast<const unsigned char*>(host) + rows.first_row * row_stride * elem;
      return buf.upload(src, view_elements(n, heads, row_stride, head_stride, p.head_size) * elem, stream_);
    };
    d.q = upload_view(q_, p.q, p.q_row_stride, p.q_head_stride, p.heads_q);
    d.k = upload_view(k_, p.k, p.k_row_stride, p.k_head_stride, p.heads_kv);
    d.v = upload_view(v_, p.v, p.v_row_stride, p.v_head_stride, p.heads_kv);
    const std::size_t out_bytes = view_elements(n, p.heads_q, p.out_row_stride, p.out_head_stride, p.head_size) * elem;
    d.out = out_.reserve(std::max<std::size_t>(out_bytes, 1));
    check(cudaMemsetAsync(d.out, 0xFF, out_bytes, stream_), "cudaMemsetAsync(poison output)");  // NaN in every dtype
    std::vector<std::int64_t> offsets(p.seq_offsets, p.seq_offsets + p.batch + 1);
    for (auto& o : offsets) o -= rows.first_row;
    d.seq_offsets = static_cast<const std::int64_t*>(offsets_.upload(offsets.data(), offsets.size() * sizeof(std::int64_t), stream_));
    d.seq_lens = static_cast<const std::int32_t*>(lens_.upload(p.seq_lens, p.batch * sizeof(std::int32_t), stream_));
    if (p.mask_format != MaskFormat::none && p.mask) {
      const std::int64_t mask_elems = p.mask_rows * p.mask_rows;
      d.mask = static_cast<const float*>(mask_.upload(p.mask, mask_elems * sizeof(float), stream_));
    }
    if (p.sinks) d.sinks = static_cast<const float*>(sinks_.upload(p.sinks, p.heads_q * sizeof(float), stream_));
    // Pageable host memory: the copies above finish before the host vectors go out of scope.
    check(cudaStreamSynchronize(stream_), "upload (cudaStreamSynchronize)");
    return d;
  }

  // The prefill kernel's tiles per sequence (prefill_tile_rows for p's dtype and head size).
  int upload_row_work(const AttnParams& p, const CallRows& rows) {
    const int tile_rows = prefill_tile_rows(p.dtype != DType::fp32, p.head_size);
    std::vector<std::int32_t> prefix(rows.begin.size() + 1, 0);
    for (std::size_t b = 0; b < rows.begin.size(); ++b)
      prefix[b + 1] = prefix[b] + static_cast<std::int32_t>(tiles_for_rows(rows.end[b] - rows.begin[b], tile_rows));
    const std::size_t n = rows.begin.size();
    row_begin_.upload(rows.begin.data(), n * sizeof(std::int64_t), stream_);
    row_end_.upload(rows.end.data(), n * sizeof(std::int64_t), stream_);
    tile_prefix_.upload(prefix.data(), prefix.size() * sizeof(std::int32_t), stream_);
    check(cudaStreamSynchronize(stream_), "upload (cudaStreamSynchronize)");
    return prefix.back();
  }

  void download_outputs(const AttnParams& p, const CallRows& rows) {
    const std::size_t elem = dtype_bytes(p.dtype);
    const std::size_t pitch = p.out_row_stride * elem;
    const std::size_t width = ((p.heads_q - 1) * p.out_head_stride + p.head_size) * elem;
    for (int b = 0; b < p.batch; ++b) {
      if (rows.begin[b] >= rows.end[b]) continue;
      const std::int64_t row = p.seq_offsets[b] + rows.begin[b];
      auto* host = static_cast<unsigned char*>(p.out) + row * pitch;
      const auto* dev = out_.as<unsigned char>() + (row - rows.first_row) * pitch;
      check(cudaMemcpy2DAsync(host, pitch, dev, pitch, width, rows.end[b] - rows.begin[b], cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpy2DAsync D2H");
    }
    check(cudaStreamSynchronize(stream_), "download (cudaStreamSynchronize)");
  }

  // The host cache becomes what the kernels wrote on the device: the harness checks the cache a DUT
  // leaves against the golden cache model, so it must be the device's, not a host-side copy.
  void download_cache(KvCache& cache) {
    check(cudaMemcpyAsync(cache.k.data(), cache_k_.get(), cache.k.size(), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync cache K D2H");
    check(cudaMemcpyAsync(cache.v.data(), cache_v_.get(), cache.v.size(), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync cache V D2H");
    check(cudaStreamSynchronize(stream_), "cache download (cudaStreamSynchronize)");
  }

  // Makes the device cache equal to the host cache (whole re-upload unless the mirror matches).
  void mirror_cache(const KvCache& cache, bool force) {
    if (!force && mirror_.matches(cache)) return;
    mirror_.valid = false;
    cache_k_.upload(cache.k.data(), cache.k.size(), stream_);
    cache_v_.upload(cache.v.data(), cache.v.size(), stream_);
    check(cudaStreamSynchronize(stream_), "cache upload (cudaStreamSynchronize)");
  }

  // The device cache with the host's current geometry (a compact ring's base is fixed on the host
  // by the first write).
  // A paged cache's page table too: the harness takes and frees pages between calls.
  CacheView cache_view(const KvCache& cache) {
    geometry_.upload(cache.geometry.data(), cache.geometry.size() * sizeof(RingGeometry), stream_);
    if (cache.paged()) page_table_.upload(cache.page_table.data(), cache.page_table.size() * sizeof(std::int32_t), stream_);
    check(cudaStreamSynchronize(stream_), "upload (cudaStreamSynchronize)");
    return {cache.policy, cache.slots, cache.heads_kv, cache.head_size, cache_k_.get(), cache_v_.get(),
            geometry_.as<const RingGeometry>(), cache.page_size, cache.table_width,
            cache.paged() ? page_table_.as<const std::int32_t>() : nullptr};
  }

  std::string problem_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::optional<StreamHold> hold_;
  int multiprocessors_ = 1;
  DeviceBuffer q_, k_, v_, out_, offsets_, lens_, mask_, sinks_, row_begin_, row_end_, tile_prefix_;
  DeviceBuffer cache_k_, cache_v_, geometry_, page_table_, partials_, arrivals_;
  MirrorState mirror_;
  std::optional<double> last_ms_;
};

}  // namespace
}  // namespace cuda

std::string cuda_device_problem() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(status);
  }
  return count > 0 ? "" : "no CUDA device";
}

std::string cuda_device_description() {
  if (std::string problem = cuda_device_problem(); !problem.empty()) return problem;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown CUDA device";
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
         std::to_string(prop.multiProcessorCount) + " SMs)";
}

double measure_cuda_copy_bandwidth_gbps() {
  using namespace cuda;
  if (std::string problem = cuda_device_problem(); !problem.empty()) throw CudaError(problem);
  constexpr std::size_t kBytes = std::size_t{1} << 30;
  check(cudaSetDevice(0), "cudaSetDevice");
  DeviceBuffer from, to;
  from.reserve(kBytes);
  to.reserve(kBytes);
  check(cudaMemset(from.get(), 1, kBytes), "cudaMemset");
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  try {
    for (int i = 0; i < 6; ++i) {
      check(cudaEventRecord(start), "cudaEventRecord");
      check(cudaMemcpyAsync(to.get(), from.get(), kBytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync D2D");
      check(cudaEventRecord(stop), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float t = 0;
      check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
      if (i > 0) ms.push_back(t);  // the first is the warm-up
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return 2.0 * kBytes / (ms[ms.size() / 2] * 1e6);
}

std::unique_ptr<Dut> make_cuda_dut() { return std::make_unique<cuda::CudaDut>(); }

}  // namespace swa::dut
