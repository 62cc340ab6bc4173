#include "swa/golden.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "row_softmax.hpp"
#include "swa/kv_cache_model.hpp"
#include "swa/paged_kv_model.hpp"

namespace swa::golden {
namespace {

// Q, K, V read once into contiguous fp64 [nTokens, heads, head_size]; the conversion is exact.
struct Fp64Inputs {
  std::vector<double> q, k, v;
};

std::vector<double> load_tensor(const void* base, DType dtype, std::int64_t rows, int heads, int head_size,
                                std::int64_t row_stride, std::int64_t head_stride) {
  std::vector<double> t(static_cast<std::size_t>(rows) * heads * head_size);
  const auto* bytes = static_cast<const unsigned char*>(base);
  const std::size_t elem = dtype_bytes(dtype);
  for (std::int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < head_size; ++d)
        t[(static_cast<std::size_t>(r) * heads + h) * head_size + d] =
            load_from(dtype, bytes + (r * row_stride + h * head_stride + d) * elem);
  return t;
}

// K and V as attention reads them: through the FP8 KV format when there is one (exact in fp64).
Fp64Inputs load_inputs(const AttnParams& p) {
  const std::int64_t n = total_tokens(p);
  Fp64Inputs in{load_tensor(p.q, p.dtype, n, p.heads_q, p.head_size, p.q_row_stride, p.q_head_stride),
                load_tensor(p.k, p.dtype, n, p.heads_kv, p.head_size, p.k_row_stride, p.k_head_stride),
                load_tensor(p.v, p.dtype, n, p.heads_kv, p.head_size, p.v_row_stride, p.v_head_stride)};
  if (is_fp8(p.kv_format)) {
    for (double& x : in.k) x = kv_read_value(p.kv_format, p.k_descale, x);
    for (double& x : in.v) x = kv_read_value(p.kv_format, p.v_descale, x);
  }
  return in;
}

struct RowIndexing {
  const AttnParams& p;
  std::size_t q(std::int64_t row, int h) const {
    return (static_cast<std::size_t>(row) * p.heads_q + h) * p.head_size;
  }
  std::size_t kv(std::int64_t row, int h) const {
    return (static_cast<std::size_t>(row) * p.heads_kv + h) * p.head_size;
  }
  std::size_t lse(std::int64_t row, int h) const { return static_cast<std::size_t>(row) * p.heads_q + h; }
};

Output allocate_output(const AttnParams& p) {
  const std::int64_t n = total_tokens(p);
  Output o;
  o.out.assign(static_cast<std::size_t>(n) * p.heads_q * p.head_size, 0.0);
  o.lse.assign(static_cast<std::size_t>(n) * p.heads_q, 0.0);
  return o;
}

// Scores of query `q_row` against keys [first, end) of sequence rows starting at `seq_row0`.
void gather_dense_keys(const AttnParams& p, const Fp64Inputs& in, const double* q, std::int64_t seq_row0,
                       std::int64_t first, std::int64_t end, int kv_head, detail::RowScratch& s) {
  const RowIndexing ix{p};
  const double scale = p.scale;
  const std::size_t appended = s.scores.size();
  for (std::int64_t j = first; j < end; ++j) {
    s.scores.push_back(scale * detail::dot_exact_products(q, &in.k[ix.kv(seq_row0 + j, kv_head)], p.head_size));
    s.values.push_back(&in.v[ix.kv(seq_row0 + j, kv_head)]);
  }
  detail::soft_cap(s.scores.data() + appended, s.scores.size() - appended, p.softcap);
}

// The row's sink logit (exact: a float holding a dtype value), or -inf when the layer has none.
double sink_of(const AttnParams& p, int q_head) {
  return p.sinks ? static_cast<double>(p.sinks[q_head]) : -std::numeric_limits<double>::infinity();
}

}  // namespace

namespace {

// One sequence's keys of one kv head, transposed to [head_size, len], so a query's scores against a
// run of consecutive keys vectorise over the keys.
struct TransposedKeys {
  std::vector<double> kT;
  std::int64_t len = 0;

  void load(const AttnParams& p, const Fp64Inputs& in, int b, int kv_head) {
    const RowIndexing ix{p};
    len = p.seq_lens[b];
    kT.resize(static_cast<std::size_t>(len) * p.head_size);
    for (std::int64_t j = 0; j < len; ++j) {
      const double* k = &in.k[ix.kv(p.seq_offsets[b] + j, kv_head)];
      for (int d = 0; d < p.head_size; ++d) kT[d * len + j] = k[d];
    }
  }
};

// Query i of sequence b (head h) against keys [first, end) by the dense definition.
detail::RowStats dense_row(const AttnParams& p, const Fp64Inputs& in, const TransposedKeys& keys, int b, int h,
                           std::int64_t i, detail::RowScratch& s, double* out) {
  const RowIndexing ix{p};
  const std::int64_t row0 = p.seq_offsets[b];
  const std::int64_t first = band_first_key(p.band, i), end = band_end_key(p.band, i, keys.len);
  const int kvh = kv_head_for(h, p.heads_q, p.heads_kv);
  s.scores.clear();
  s.values.clear();
  if (end > first)
    detail::scores_from_transposed(&in.q[ix.q(row0 + i, h)], keys.kT.data(), keys.len, first, end - first,
                                   p.head_size, p.scale, s.scores, s.score_err);
  detail::soft_cap(s.scores.data(), s.scores.size(), p.softcap);
  for (std::int64_t j = first; j < end; ++j) s.values.push_back(&in.v[ix.kv(row0 + j, kvh)]);
  return detail::softmax_times_values(s, p.head_size, out, sink_of(p, h), first);
}

// Keys per tile of dense_block: a multiple of kValueBlock, so tiles never split a P.V block.
constexpr std::int64_t kKeyTile = 4 * detail::kValueBlock;
// Query rows per block: every q head of the GQA group for each, so a block reuses each K and V tile
// kQueryRows x group times while it sits in cache.
constexpr std::int64_t kQueryRows = 16;

struct DenseBlockScratch {
  std::vector<double> scores, score_err;  // [block rows][span], [kKeyTile]
  std::vector<const double*> values;      // [span]
  std::vector<detail::RowNorm> norms;
  std::vector<double> sum, err, block;    // [block rows][head_size], [head_size]
};

// Query rows [i0, i1) of sequence b, all q heads of kv head kvh, by the dense definition, tile by
// tile over the union of their key ranges. Each row gets the same bits as dense_row (trace_row):
// every score is computed by one key's own arithmetic, and P.V blocks end at multiples of
// kValueBlock in key numbering, which tile boundaries respect.
void dense_block(const AttnParams& p, const Fp64Inputs& in, const TransposedKeys& keys, int b, int kvh,
                 std::int64_t i0, std::int64_t i1, DenseBlockScratch& s, Output& o) {
  const RowIndexing ix{p};
  const int group = p.heads_q / p.heads_kv;
  const int d = p.head_size;
  const std::int64_t row0 = p.seq_offsets[b];
  const std::int64_t n = (i1 - i0) * group;
  auto first_of = [&](std::int64_t r) { return band_first_key(p.band, i0 + r / group); };
  auto end_of = [&](std::int64_t r) { return band_end_key(p.band, i0 + r / group, keys.len); };
  std::int64_t lo = keys.len, hi = 0;
  for (std::int64_t r = 0; r < n; r += group)
    if (end_of(r) > first_of(r)) {
      lo = std::min(lo, first_of(r));
      hi = std::max(hi, end_of(r));
    }
  const std::int64_t base = lo < hi ? lo - lo % detail::kValueBlock : 0;
  const std::int64_t span = std::max<std::int64_t>(0, hi - base);
  s.scores.resize(static_cast<std::size_t>(n * span));
  s.score_err.resize(kKeyTile);
  for (std::int64_t t0 = base; t0 < hi; t0 += kKeyTile)
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t f = std::max(t0, first_of(r)), e = std::min(t0 + kKeyTile, end_of(r));
      if (e <= f) continue;
      const int h = kvh * group + static_cast<int>(r % group);
      detail::scores_tile(&in.q[ix.q(row0 + i0 + r / group, h)], keys.kT.data(), keys.len, f, e - f, d, p.scale,
                          &s.scores[r * span + (f - base)], s.score_err.data());
    }
  s.norms.resize(n);
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t f = first_of(r), count = std::max<std::int64_t>(0, end_of(r) - f);
    double* row = count > 0 ? &s.scores[r * span + (f - base)] : nullptr;
    detail::soft_cap(row, count, p.softcap);
    s.norms[r] = detail::exponentiate(row, count, sink_of(p, kvh * group + static_cast<int>(r % group)));
  }
  s.values.resize(span);
  for (std::int64_t j = 0; j < span; ++j) s.values[j] = &in.v[ix.kv(row0 + base + j, kvh)];
  s.sum.assign(static_cast<std::size_t>(n) * d, 0.0);
  s.err.assign(s.sum.size(), 0.0);
  s.block.resize(d);
  for (std::int64_t t0 = base; t0 < hi; t0 += kKeyTile)
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t f = std::max(t0, first_of(r)), e = std::min(t0 + kKeyTile, end_of(r));
      if (e <= f) continue;
      detail::accumulate_values(&s.scores[r * span + (f - base)], &s.values[f - base], f, e - f, d, &s.sum[r * d],
                                &s.err[r * d], s.block.data());
    }
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t i = i0 + r / group;
    const int h = kvh * group + static_cast<int>(r % group);
    o.lse[ix.lse(row0 + i, h)] =
        detail::finish_row(s.norms[r], &s.sum[r * d], &s.err[r * d], d, &o.out[ix.q(row0 + i, h)]).lse;
  }
}

}  // namespace

Output attention_dense(const AttnParams& p) {
  validate(p);
  const Fp64Inputs in = load_inputs(p);
  Output o = allocate_output(p);
  const std::int64_t units = static_cast<std::int64_t>(p.batch) * p.heads_kv;
  std::vector<TransposedKeys> keys(static_cast<std::size_t>(units));
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t unit = 0; unit < units; ++unit)
    keys[unit].load(p, in, static_cast<int>(unit / p.heads_kv), static_cast<int>(unit % p.heads_kv));
  // Tasks: (sequence, kv head, block of query rows). Blocks write disjoint rows and compute each row
  // the same way whoever runs it, so the result does not depend on the thread count.
  struct Task {
    int b, kvh;
    std::int64_t i0, i1;
  };
  std::vector<Task> tasks;
  for (int b = 0; b < p.batch; ++b)
    for (int kvh = 0; kvh < p.heads_kv; ++kvh)
      for (std::int64_t i0 = 0; i0 < p.seq_lens[b]; i0 += kQueryRows)
        tasks.push_back({b, kvh, i0, std::min<std::int64_t>(p.seq_lens[b], i0 + kQueryRows)});
#pragma omp parallel
  {
    DenseBlockScratch s;
#pragma omp for schedule(dynamic, 1)
    for (std::size_t t = 0; t < tasks.size(); ++t) {
      const Task& task = tasks[t];
      dense_block(p, in, keys[task.b * p.heads_kv + task.kvh], task.b, task.kvh, task.i0, task.i1, s, o);
    }
  }
  return o;
}

namespace {

// Query rows [s, e) of one sequence attend to the cache and to chunk rows [s, i]. Cache: a
// KvCacheModel or a PagedSequenceView.
template <class Cache>
void attend_chunk(const AttnParams& p, const Fp64Inputs& in, const Cache& cache, std::int64_t row0,
                  std::int64_t s, std::int64_t e, bool include_chunk_keys, Output& o, detail::RowScratch& scratch) {
  const RowIndexing ix{p};
  for (std::int64_t i = s; i < e; ++i)
    for (int h = 0; h < p.heads_q; ++h) {
      const int kvh = kv_head_for(h, p.heads_q, p.heads_kv);
      const double* q = &in.q[ix.q(row0 + i, h)];
      scratch.scores.clear();
      scratch.values.clear();
      for (std::int64_t slot = cache.first_slot_for(p.band, i); slot < cache.end_slot_for(p.band, i); ++slot) {
        const std::int64_t pos = cache.position(slot);
        if (pos < 0 || !band_visible(p.band, i, pos)) continue;
        scratch.scores.push_back(p.scale * detail::dot_exact_products(q, cache.key(slot, kvh), p.head_size));
        scratch.values.push_back(cache.value(slot, kvh));
      }
      detail::soft_cap(scratch.scores.data(), scratch.scores.size(), p.softcap);
      if (include_chunk_keys)
        gather_dense_keys(p, in, q, row0, std::max(s, band_first_key(p.band, i)), band_end_key(p.band, i, e), kvh,
                          scratch);
      const auto stats = detail::softmax_times_values(scratch, p.head_size, &o.out[ix.q(row0 + i, h)], sink_of(p, h));
      o.lse[ix.lse(row0 + i, h)] = stats.lse;
    }
}

// A paged cache's pool is shared by the batch, so the schedule runs call by call as run_schedule
// drives a DUT: every sequence takes its pages in batch order, the call attends and stores (a chunk
// attends first, a decode step stores first), then every sequence frees its dead pages in batch
// order (paging.hpp).
Output attention_paged(const AttnParams& p, const Fp64Inputs& in, Output o) {
  const RowIndexing ix{p};
  PagedKvModel cache(p);
  const std::int64_t kv_row_stride = static_cast<std::int64_t>(p.heads_kv) * p.head_size;
  // Per sequence, its writes in order (s, e, next query): its prompt chunks, then its decode steps.
  std::vector<std::vector<std::array<std::int64_t, 3>>> writes(p.batch);
  std::vector<std::int64_t> own_chunks(p.batch);
  const std::int64_t steps = p.mode == RunMode::decode ? p.decode_steps : 0;
  std::int64_t chunks = 0;
  for (int b = 0; b < p.batch; ++b) {
    for_each_cache_write(p, b, [&](std::int64_t s, std::int64_t e, std::int64_t q) { writes[b].push_back({s, e, q}); });
    own_chunks[b] = static_cast<std::int64_t>(writes[b].size()) - steps;
    chunks = std::max(chunks, own_chunks[b]);
  }
  // Call c < chunks is prompt chunk c of every sequence that has one; call chunks + t is decode step t.
  auto write_at = [&](int b, std::int64_t call) -> const std::array<std::int64_t, 3>* {
    if (call < chunks) return call < own_chunks[b] ? &writes[b][call] : nullptr;
    return &writes[b][own_chunks[b] + (call - chunks)];
  };
  auto store = [&](int b, const std::array<std::int64_t, 3>& w) {
    const std::int64_t row = p.seq_offsets[b] + w[0];
    cache.store(b, w[0], w[1], &in.k[ix.kv(row, 0)], &in.v[ix.kv(row, 0)], kv_row_stride);
  };
  for (std::int64_t call = 0; call < chunks + steps; ++call) {
    const bool decoding = call >= chunks;
    for (int b = 0; b < p.batch; ++b)
      if (const auto* w = write_at(b, call)) cache.take(b, (*w)[0], (*w)[1], (*w)[2]);
    if (decoding)
      for (int b = 0; b < p.batch; ++b)
        if (const auto* w = write_at(b, call)) store(b, *w);
#pragma omp parallel
    {
      detail::RowScratch scratch;
#pragma omp for schedule(dynamic, 1)
      for (int b = 0; b < p.batch; ++b)
        if (const auto* w = write_at(b, call))
          attend_chunk(p, in, PagedSequenceView(cache, b), p.seq_offsets[b], (*w)[0], (*w)[1],
                       /*include_chunk_keys=*/!decoding, o, scratch);
    }
    if (!decoding)
      for (int b = 0; b < p.batch; ++b)
        if (const auto* w = write_at(b, call)) store(b, *w);
    for (int b = 0; b < p.batch; ++b)
      if (const auto* w = write_at(b, call)) cache.release(b, (*w)[1]);
  }
  return o;
}

}  // namespace

Output attention_scheduled(const AttnParams& p) {
  validate(p);
  if (p.mode == RunMode::prefill) return attention_dense(p);
  const Fp64Inputs in = load_inputs(p);
  if (p.cache == CachePolicy::paged) return attention_paged(p, in, allocate_output(p));
  Output o = allocate_output(p);
  const RowIndexing ix{p};
  const std::int64_t window = p.band.left + 1;  // ring slots; validate() bounds it for rings
#pragma omp parallel
  {
    detail::RowScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (int b = 0; b < p.batch; ++b) {
      const std::int64_t row0 = p.seq_offsets[b];
      const std::int64_t len = p.seq_lens[b];
      const std::int64_t prompt = prompt_len(p, b);
      KvCacheModel cache(p.cache, window, len, p.heads_kv, p.head_size);
      const std::int64_t kv_row_stride = static_cast<std::int64_t>(p.heads_kv) * p.head_size;
      const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
      // Prefill chunks: attend to cache + chunk, then write the chunk.
      for (std::int64_t s = 0; s < prompt; s += chunk) {
        const std::int64_t e = std::min(prompt, s + chunk);
        attend_chunk(p, in, cache, row0, s, e, /*include_chunk_keys=*/true, o, scratch);
        cache.write(s, e - s, &in.k[ix.kv(row0 + s, 0)], &in.v[ix.kv(row0 + s, 0)], kv_row_stride);
      }
      // Decode steps: write the new token, then attend to the cache alone.
      for (std::int64_t i = prompt; i < len; ++i) {
        cache.write(i, 1, &in.k[ix.kv(row0 + i, 0)], &in.v[ix.kv(row0 + i, 0)], kv_row_stride);
        attend_chunk(p, in, cache, row0, i, i + 1, /*include_chunk_keys=*/false, o, scratch);
      }
    }
  }
  return o;
}

Output run(const AttnParams& p) { return p.mode == RunMode::prefill ? attention_dense(p) : attention_scheduled(p); }

RowTrace trace_row(const AttnParams& p, int sequence, int q_head, std::int64_t token) {
  validate(p);
  const Fp64Inputs in = load_inputs(p);
  TransposedKeys keys;
  keys.load(p, in, sequence, kv_head_for(q_head, p.heads_q, p.heads_kv));
  detail::RowScratch s;
  RowTrace t;
  t.out.resize(p.head_size);
  const std::int64_t first = band_first_key(p.band, token), end = band_end_key(p.band, token, keys.len);
  for (std::int64_t j = first; j < end; ++j) t.key_positions.push_back(j);
  // dense_row leaves probabilities in s.scores; recompute the scores for the trace first.
  detail::RowScratch scores_only;
  if (end > first)
    detail::scores_from_transposed(&in.q[RowIndexing{p}.q(p.seq_offsets[sequence] + token, q_head)], keys.kT.data(),
                                   keys.len, first, end - first, p.head_size, p.scale, scores_only.scores,
                                   scores_only.score_err);
  detail::soft_cap(scores_only.scores.data(), scores_only.scores.size(), p.softcap);
  t.scores = scores_only.scores;
  const auto stats = dense_row(p, in, keys, sequence, q_head, token, s, t.out.data());
  t.probabilities = s.scores;
  t.row_max = stats.row_max;
  t.lse = stats.lse;
  return t;
}

}  // namespace swa::golden
