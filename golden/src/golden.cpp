#include "swa/golden.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "key_tiles.hpp"
#include "row_softmax.hpp"
#include "swa/kv_cache_model.hpp"
#include "swa/paged_kv_model.hpp"

namespace swa::golden {
namespace {

// One row of one head of an input tensor, exactly in fp64.
void read_row(const void* base, DType dtype, std::int64_t row_stride, std::int64_t head_stride, std::int64_t row,
              int head, int head_size, double* out) {
  const std::size_t elem = dtype_bytes(dtype);
  const auto* first = static_cast<const unsigned char*>(base) + (row * row_stride + head * head_stride) * elem;
  constexpr int kBlock = 64;
  float values[kBlock];
  for (int d0 = 0; d0 < head_size; d0 += kBlock) {
    const int n = std::min(kBlock, head_size - d0);
    load_all_from(dtype, first + d0 * elem, static_cast<std::size_t>(n), values);
    for (int d = 0; d < n; ++d) out[d0 + d] = values[d];
  }
}

void read_q_row(const AttnParams& p, std::int64_t row, int head, double* out) {
  read_row(p.q, p.dtype, p.q_row_stride, p.q_head_stride, row, head, p.head_size, out);
}

// A K or V row as attention reads it: through the FP8 KV format when there is one (exact in fp64).
enum class KvTensor { k, v };
void read_kv_row(const AttnParams& p, KvTensor t, std::int64_t row, int head, double* out) {
  const bool k = t == KvTensor::k;
  read_row(k ? p.k : p.v, p.dtype, k ? p.k_row_stride : p.v_row_stride, k ? p.k_head_stride : p.v_head_stride, row,
           head, p.head_size, out);
  if (is_fp8(p.kv_format))
    for (int d = 0; d < p.head_size; ++d) out[d] = kv_read_value(p.kv_format, k ? p.k_descale : p.v_descale, out[d]);
}

// K and V read once into contiguous fp64 [nTokens, heads_kv, head_size], for the cache models of the
// scheduled paths (the dense path reads rows straight into its key tiles).
struct Fp64KeysValues {
  std::vector<double> k, v;
};

Fp64KeysValues load_keys_values(const AttnParams& p) {
  const std::int64_t n = total_tokens(p);
  const std::size_t row = static_cast<std::size_t>(p.heads_kv) * p.head_size;
  Fp64KeysValues in{std::vector<double>(n * row), std::vector<double>(n * row)};
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r)
    for (int h = 0; h < p.heads_kv; ++h) {
      read_kv_row(p, KvTensor::k, r, h, &in.k[r * row + h * p.head_size]);
      read_kv_row(p, KvTensor::v, r, h, &in.v[r * row + h * p.head_size]);
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

// The row's sink logit (exact: a float holding a dtype value), or -inf when the layer has none.
double sink_of(const AttnParams& p, int q_head) {
  return p.sinks ? static_cast<double>(p.sinks[q_head]) : -std::numeric_limits<double>::infinity();
}

}  // namespace

namespace {

// Query rows per block: every q head of the GQA group for each, so a block reuses each K and V tile
// kQueryRows x group times while it sits in cache.
constexpr std::int64_t kQueryRows = 16;

// One sequence's keys of one kv head, numbered by position.
void list_sequence_keys(const AttnParams& p, int b, int kvh, detail::KeyTiles& keys) {
  keys.reset(p.head_size, p.seq_lens[b]);
  std::vector<double> k(p.head_size), v(p.head_size);
  for (std::int64_t j = 0; j < p.seq_lens[b]; ++j) {
    read_kv_row(p, KvTensor::k, p.seq_offsets[b] + j, kvh, k.data());
    read_kv_row(p, KvTensor::v, p.seq_offsets[b] + j, kvh, v.data());
    keys.append(k.data(), v.data());
  }
}

// Rows [i0, i1) of sequence b, every q head of kv head kvh, against the listed keys: row i's keys are
// list numbers [key_range(i).first, key_range(i).second).
template <class KeyRange>
void attend_rows(const AttnParams& p, const detail::KeyTiles& keys, int b, int kvh, std::int64_t i0, std::int64_t i1,
                 KeyRange key_range, detail::BlockScratch& s, Output& o) {
  const RowIndexing ix{p};
  const int group = p.heads_q / p.heads_kv;
  const std::int64_t row0 = p.seq_offsets[b];
  s.rows.clear();
  s.queries.resize(static_cast<std::size_t>(i1 - i0) * group * p.head_size);
  double* q = s.queries.data();
  for (std::int64_t i = i0; i < i1; ++i) {
    const auto [first, end] = key_range(i);
    for (int g = 0; g < group; ++g, q += p.head_size) {
      const int h = kvh * group + g;
      read_q_row(p, row0 + i, h, q);
      s.rows.push_back({q, first, end, sink_of(p, h), &o.out[ix.q(row0 + i, h)], &o.lse[ix.lse(row0 + i, h)]});
    }
  }
  detail::attend_block(keys, p.head_size, p.scale, p.softcap, s);
}

}  // namespace

Output attention_dense(const AttnParams& p) {
  validate(p);
  Output o = allocate_output(p);
  const std::int64_t units = static_cast<std::int64_t>(p.batch) * p.heads_kv;
  std::vector<detail::KeyTiles> keys(static_cast<std::size_t>(units));
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t unit = 0; unit < units; ++unit)
    list_sequence_keys(p, static_cast<int>(unit / p.heads_kv), static_cast<int>(unit % p.heads_kv), keys[unit]);
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
    detail::BlockScratch s;
#pragma omp for schedule(dynamic, 1)
    for (std::size_t t = 0; t < tasks.size(); ++t) {
      const Task& task = tasks[t];
      const std::int64_t len = p.seq_lens[task.b];
      attend_rows(p, keys[task.b * p.heads_kv + task.kvh], task.b, task.kvh, task.i0, task.i1,
                  [&](std::int64_t i) { return std::pair(band_first_key(p.band, i), band_end_key(p.band, i, len)); },
                  s, o);
    }
  }
  return o;
}

namespace {

struct CallScratch {
  std::vector<std::pair<std::int64_t, std::int64_t>> held;  // (position, slot)
  std::vector<std::int64_t> positions;                      // of the listed keys, after the padding
  std::int64_t padding = 0;
  detail::KeyTiles keys;
  detail::BlockScratch block;
};

// One call of sequence b's schedule (a prefill chunk, or a decode step), kv head kvh: rows [s, e)
// attend to what `cache` holds (head cache_head of it) at positions a row of the call can see, plus,
// for a prefill chunk, the chunk's own keys. The keys are listed by position; when the positions run
// without a gap from the first row's first key, the list is padded in front so list numbers equal
// positions modulo kValueBlock (two tiles), and every row then gets its dense row's bits. Cache: a
// KvCacheModel or a PagedSequenceView.
template <class Cache>
void attend_call(const AttnParams& p, const Fp64KeysValues& in, const Cache& cache, int cache_head, int b, int kvh,
                 std::int64_t s, std::int64_t e, bool include_chunk_keys, CallScratch& c, Output& o) {
  const RowIndexing ix{p};
  const std::int64_t row0 = p.seq_offsets[b];
  const std::int64_t lowest = band_first_key(p.band, s);
  c.held.clear();
  for (std::int64_t slot = cache.first_slot_for(p.band, s); slot < cache.end_slot_for(p.band, e - 1); ++slot) {
    const std::int64_t pos = cache.position(slot);
    if (pos >= lowest && pos < e) c.held.emplace_back(pos, slot);
  }
  std::sort(c.held.begin(), c.held.end());
  c.positions.clear();
  for (const auto& [pos, slot] : c.held) c.positions.push_back(pos);
  if (include_chunk_keys)
    for (std::int64_t j = s; j < e; ++j) c.positions.push_back(j);
  const std::int64_t n = static_cast<std::int64_t>(c.positions.size());
  const bool consecutive = n > 0 && c.positions[0] == lowest && c.positions[n - 1] - c.positions[0] == n - 1;
  c.padding = consecutive ? lowest % detail::kValueBlock : 0;
  c.keys.reset(p.head_size, c.padding + n);
  for (std::int64_t j = 0; j < c.padding; ++j) c.keys.append_unused();
  for (const auto& [pos, slot] : c.held) c.keys.append(cache.key(slot, cache_head), cache.value(slot, cache_head));
  if (include_chunk_keys)
    for (std::int64_t j = s; j < e; ++j) c.keys.append(&in.k[ix.kv(row0 + j, kvh)], &in.v[ix.kv(row0 + j, kvh)]);
  const auto key_range = [&](std::int64_t i) {
    const auto at = [&](std::int64_t pos) {
      return c.padding + (std::lower_bound(c.positions.begin(), c.positions.end(), pos) - c.positions.begin());
    };
    return std::pair(at(band_first_key(p.band, i)), at(band_end_key(p.band, i, e)));
  };
  for (std::int64_t i0 = s; i0 < e; i0 += kQueryRows)
    attend_rows(p, c.keys, b, kvh, i0, std::min(e, i0 + kQueryRows), key_range, c.block, o);
}

// A paged cache's pool is shared by the batch, so the schedule runs call by call as run_schedule
// drives a DUT: every sequence takes its pages in batch order, the call attends and stores (a chunk
// attends first, a decode step stores first), then every sequence frees its dead pages in batch
// order (paging.hpp).
Output attention_paged(const AttnParams& p, const Fp64KeysValues& in, Output o) {
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
  const std::int64_t units = static_cast<std::int64_t>(p.batch) * p.heads_kv;
  for (std::int64_t call = 0; call < chunks + steps; ++call) {
    const bool decoding = call >= chunks;
    for (int b = 0; b < p.batch; ++b)
      if (const auto* w = write_at(b, call)) cache.take(b, (*w)[0], (*w)[1], (*w)[2]);
    if (decoding)
      for (int b = 0; b < p.batch; ++b)
        if (const auto* w = write_at(b, call)) store(b, *w);
#pragma omp parallel
    {
      CallScratch scratch;
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t unit = 0; unit < units; ++unit) {
        const int b = static_cast<int>(unit / p.heads_kv), kvh = static_cast<int>(unit % p.heads_kv);
        if (const auto* w = write_at(b, call))
          attend_call(p, in, PagedSequenceView(cache, b), kvh, b, kvh, (*w)[0], (*w)[1],
                      /*include_chunk_keys=*/!decoding, scratch, o);
      }
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
  const Fp64KeysValues in = load_keys_values(p);
  if (p.cache == CachePolicy::paged) return attention_paged(p, in, allocate_output(p));
  Output o = allocate_output(p);
  const RowIndexing ix{p};
  const std::int64_t window = p.band.left + 1;  // ring slots; validate() bounds it for rings
  const std::int64_t kv_row_stride = static_cast<std::int64_t>(p.heads_kv) * p.head_size;
  // Tasks: (sequence, kv head), each through its own cache of that one head, so the tasks share
  // nothing and the result does not depend on the thread count.
  const std::int64_t units = static_cast<std::int64_t>(p.batch) * p.heads_kv;
#pragma omp parallel
  {
    CallScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t unit = 0; unit < units; ++unit) {
      const int b = static_cast<int>(unit / p.heads_kv), kvh = static_cast<int>(unit % p.heads_kv);
      const std::int64_t row0 = p.seq_offsets[b];
      const std::int64_t len = p.seq_lens[b];
      const std::int64_t prompt = prompt_len(p, b);
      KvCacheModel cache(p.cache, window, len, /*heads_kv=*/1, p.head_size);
      const auto write = [&](std::int64_t s, std::int64_t count) {
        cache.write(s, count, &in.k[ix.kv(row0 + s, kvh)], &in.v[ix.kv(row0 + s, kvh)], kv_row_stride);
      };
      const std::int64_t chunk = p.chunk > 0 ? p.chunk : prompt;
      // Prefill chunks: attend to cache + chunk, then write the chunk.
      for (std::int64_t s = 0; s < prompt; s += chunk) {
        const std::int64_t e = std::min(prompt, s + chunk);
        attend_call(p, in, cache, 0, b, kvh, s, e, /*include_chunk_keys=*/true, scratch, o);
        write(s, e - s);
      }
      // Decode steps: write the new token, then attend to the cache alone.
      for (std::int64_t i = prompt; i < len; ++i) {
        write(i, 1);
        attend_call(p, in, cache, 0, b, kvh, i, i + 1, /*include_chunk_keys=*/false, scratch, o);
      }
    }
  }
  return o;
}

Output run(const AttnParams& p) { return p.mode == RunMode::prefill ? attention_dense(p) : attention_scheduled(p); }

RowTrace trace_row(const AttnParams& p, int sequence, int q_head, std::int64_t token) {
  validate(p);
  const int kvh = kv_head_for(q_head, p.heads_q, p.heads_kv);
  detail::KeyTiles keys;
  list_sequence_keys(p, sequence, kvh, keys);
  const std::int64_t first = band_first_key(p.band, token), end = band_end_key(p.band, token, keys.size());
  std::vector<double> q_row(p.head_size);
  read_q_row(p, p.seq_offsets[sequence] + token, q_head, q_row.data());
  const double* q = q_row.data();
  RowTrace t;
  for (std::int64_t j = first; j < end; ++j) t.key_positions.push_back(j);
  if (end > first) detail::scores_from_tiles(q, keys.tile(0), first, end - first, p.head_size, p.scale, t.scores);
  detail::soft_cap(t.scores.data(), t.scores.size(), p.softcap);
  // The row as the dense block computes it (one row's bits do not depend on its block).
  t.out.resize(p.head_size);
  double lse = 0.0;
  detail::BlockScratch s;
  s.rows.push_back({q, first, end, sink_of(p, q_head), t.out.data(), &lse});
  detail::attend_block(keys, p.head_size, p.scale, p.softcap, s);
  const detail::RowNorm norm = s.norms[0];
  const std::int64_t base = first - first % detail::kKeyTile;
  for (std::int64_t j = first; j < end; ++j) t.probabilities.push_back(s.scores[j - base] / norm.l);
  t.row_max = norm.row_max;
  t.lse = lse;
  return t;
}

}  // namespace swa::golden
