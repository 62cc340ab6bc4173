#include "swa/harness/golden_file.hpp"

#include "swa/harness/h5.hpp"

namespace swa::harness {

void write_golden_file(const std::filesystem::path& path, const Problem& pr, const golden::Output& golden,
                       const std::vector<float>& baseline) {
  const ProblemSpec& s = pr.spec;
  const auto n = static_cast<hsize_t>(pr.seq_offsets.back());
  const auto hq = static_cast<hsize_t>(s.heads_q), hkv = static_cast<hsize_t>(s.heads_kv);
  const auto d = static_cast<hsize_t>(s.head_size);
  h5::AtomicFile file(path);
  const hid_t f = file.id();
  h5::write_dataset(f, "q", pr.q, {n, hq, d});
  h5::write_dataset(f, "k", pr.k, {n, hkv, d});
  h5::write_dataset(f, "v", pr.v, {n, hkv, d});
  h5::write_dataset(f, "out", golden.out, {n, hq, d});
  h5::write_dataset(f, "lse", golden.lse, {n, hq});
  h5::write_dataset(f, "baseline", baseline, {n, hq, d});
  h5::write_dataset(f, "seq_lens", s.seq_lens, {static_cast<hsize_t>(s.seq_lens.size())});
  std::vector<std::int32_t> prompts(s.seq_lens.size());
  for (std::size_t b = 0; b < prompts.size(); ++b) prompts[b] = static_cast<std::int32_t>(prompt_len(pr.params, static_cast<int>(b)));
  h5::write_dataset(f, "prompt_lens", prompts, {static_cast<hsize_t>(prompts.size())});

  h5::Handle root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose, "open /");
  const hid_t r = root.id();
  h5::write_attr(r, "heads", static_cast<std::int64_t>(s.heads_q));
  h5::write_attr(r, "kv_heads", static_cast<std::int64_t>(s.heads_kv));
  h5::write_attr(r, "head_size", static_cast<std::int64_t>(s.head_size));
  const auto window = window_from_band(s.band, WindowConvention::keys_including_self);
  h5::write_attr(r, "window", window ? *window : std::int64_t{-1});
  h5::write_attr(r, "window_convention", std::string("keys_including_self: query i sees key j iff i-W < j <= i"));
  h5::write_attr(r, "band_left", s.band.left);
  h5::write_attr(r, "band_right", s.band.right);
  h5::write_attr(r, "scale", static_cast<double>(pr.params.scale));
  h5::write_attr(r, "dtype", std::string(dtype_name(s.dtype)));
  h5::write_attr(r, "mode", std::string(mode_name(s.mode)));
  h5::write_attr(r, "cache", std::string(s.mode == RunMode::prefill ? "none" : cache_name(s.cache)));
  h5::write_attr(r, "chunk", static_cast<std::int64_t>(s.chunk));
  h5::write_attr(r, "decode_steps", static_cast<std::int64_t>(s.decode_steps));
  h5::write_attr(r, "seed", static_cast<std::int64_t>(s.seed));
  h5::write_attr(r, "inputs", std::string(distribution_name(s.inputs)));
  h5::write_attr(r, "rng", std::string("philox4x32-10; counter (element, role q=1 k=2 v=3), key seed"));
  h5::write_attr(r, "gqa", std::string("q head h reads kv head h / (heads / kv_heads)"));
  root.close();
  file.commit();
}

}  // namespace swa::harness
