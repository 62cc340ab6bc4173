/* Faulty kernels for judging bisect: one plugin library per fault, built from this file with
 * -DSWA_FAULT="name" (dut/external/faults/CMakeLists.txt; the list and what each does is in
 * faults.txt). SWA_FAULT="none" is the correct kernel.
 *
 * Written from swa/dut_v2.h alone, independently of the example plugin: a FlashAttention-style
 * kernel that walks the visible keys in tiles of 16 with an online softmax (running max, rescaled
 * sum and accumulator), fp32 accumulation, output rounded to nearest even. Its FP8 codec is a table
 * search, not the example's bit arithmetic. Its cache reader finds a position's slot from the
 * position itself (not from tokens_written), so a fault in the cache's bookkeeping leaves the
 * outputs right and only the cache check sees it.
 *
 * The faults were written after bisect's methods, to judge them; bisect has no list of them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swa/dut_v2.h"

#ifndef SWA_FAULT
#define SWA_FAULT "none"
#endif

static int fault(const char* name) { return strcmp(SWA_FAULT, name) == 0; }

enum { KEY_TILE = 16, MAX_HEAD_SIZE = 1024 };

/* ---- storage ----------------------------------------------------------------------------------- */
static float load(int32_t dtype, const void* base, int64_t i) {
  if (dtype == SWA_DUT_FP32) return ((const float*)base)[i];
  if (dtype == SWA_DUT_FP16) return (float)((const _Float16*)base)[i];
  const uint32_t bits = (uint32_t)((const uint16_t*)base)[i] << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static void store(int32_t dtype, void* base, int64_t i, float x) {
  if (dtype == SWA_DUT_FP32) {
    ((float*)base)[i] = x;
  } else if (dtype == SWA_DUT_FP16) {
    ((_Float16*)base)[i] = (_Float16)x;
  } else {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits = isnan(x) ? 0x7fc00000u : bits + 0x7fffu + ((bits >> 16) & 1u);
    ((uint16_t*)base)[i] = (uint16_t)(bits >> 16);
  }
}

static size_t elem_bytes(int32_t dtype) { return dtype == SWA_DUT_FP32 ? 4 : 2; }

/* ---- FP8: a decode table per format, and encoding as a search of its finite magnitudes -------- */
static float fp8_table[3][128]; /* [format][code & 0x7f], positive magnitudes */
static int fp8_finite_codes[3];  /* codes 0 .. n-1 are finite */

static void fp8_init(void) {
  for (int f = 1; f <= 2; ++f) {
    const int mant = f == SWA_DUT_KV_FP8_E4M3 ? 3 : 2, bias = f == SWA_DUT_KV_FP8_E4M3 ? 7 : 15;
    for (int c = 0; c < 128; ++c) {
      const int e = c >> mant, m = c & ((1 << mant) - 1);
      fp8_table[f][c] = e == 0 ? ldexpf((float)m, 1 - bias - mant) : ldexpf((float)((1 << mant) | m), e - bias - mant);
    }
    fp8_finite_codes[f] = f == SWA_DUT_KV_FP8_E4M3 ? 127 : 124; /* e4m3: 0x7f NaN; e5m2: 0x7c inf */
  }
}

static float fp8_decode(int32_t format, uint8_t code) {
  const int c = code & 0x7f;
  if (c >= fp8_finite_codes[format]) return format == SWA_DUT_KV_FP8_E5M2 && c == 0x7c ? ((code & 0x80) ? -INFINITY : INFINITY) : NAN;
  return (code & 0x80) ? -fp8_table[format][c] : fp8_table[format][c];
}

static uint8_t fp8_encode(int32_t format, float x) {
  if (isnan(x)) return 0x7f;
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  const float a = fabsf(x);
  const int n = fp8_finite_codes[format];
  if (a >= fp8_table[format][n - 1]) return sign | (uint8_t)(n - 1); /* saturate */
  int lo = 0, hi = n - 1; /* table[lo] <= a < table[hi] */
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (fp8_table[format][mid] <= a) lo = mid;
    else hi = mid;
  }
  if (fault("fp8_round_toward_zero")) return sign | (uint8_t)lo;
  const float below = a - fp8_table[format][lo], above = fp8_table[format][hi] - a;
  const int code = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | (uint8_t)code;
}

static int32_t kv_format(const swa_dut_v2_params* p) {
  return SWA_DUT_V2_HAS(p, swa_dut_v2_params, v_descale) ? p->kv_format : SWA_DUT_KV_DTYPE;
}

/* The FP8 code of x held with `descale`. */
static uint8_t fp8_store(const swa_dut_v2_params* p, float x, float descale) {
  return fp8_encode(p->kv_format, fault("fp8_scale_inverted") ? x * descale : x / descale);
}

static float fp8_load(const swa_dut_v2_params* p, uint8_t code, float descale) {
  const float x = fp8_decode(p->kv_format, code);
  return fault("fp8_scale_inverted") ? x / descale : x * descale;
}

static float v_descale(const swa_dut_v2_params* p) { return fault("fp8_v_with_k_descale") ? p->k_descale : p->v_descale; }

/* ---- visibility ---------------------------------------------------------------------------------- */
static int64_t right_bound(const swa_dut_v2_params* p) {
  if (fault("right_window_short") && p->window_right > 0) return p->window_right - 1;
  if (fault("two_sided_right_capped_at_left") && p->window_left >= 0 && p->window_right > p->window_left) return p->window_left;
  return p->window_right;
}

static int64_t left_bound(const swa_dut_v2_params* p) {
  if (fault("two_sided_band_shifted") && p->window_left >= 0 && p->window_right > 0)
    return p->window_left > p->window_right ? p->window_left - p->window_right : 0;
  return p->window_left;
}

static int visible(const swa_dut_v2_params* p, int64_t i, int64_t j) {
  const int64_t d = i - j, left = left_bound(p), right = right_bound(p);
  /* A lower edge applied per aligned tile of 16 keys: a tile with any visible key is kept whole. */
  const int tile_kept = fault("window_edge_per_key_tile") && j / KEY_TILE * KEY_TILE + KEY_TILE - 1 >= i - left;
  if (left >= 0 && d > left && !tile_kept) return 0;
  if (right >= 0 && -d > right) return 0;
  if (p->mode == SWA_DUT_PREFILL && p->mask && p->mask_format == SWA_DUT_MASK_SWA_NORM)
    return i < p->mask_rows && j < p->mask_rows && p->mask[i * p->mask_rows + j] == 0.0f;
  return 1;
}

/* ---- where K/V of a position are ----------------------------------------------------------------- */
static int64_t kv_row(const swa_dut_v2_params* p, int b, int64_t pos) {
  if (fault("batch_kv_offsets_from_prompt_lens") && p->mode == SWA_DUT_DECODE)
    return p->seq_offsets[b] - (int64_t)b * p->decode_steps + pos;
  return p->seq_offsets[b] + pos;
}

static int kv_head(const swa_dut_v2_params* p, int h) { return h / (p->heads_q / p->heads_kv); }

static int paged(const swa_dut_v2_cache* c) { return c->policy == SWA_DUT_PAGED; }

static int64_t table_row(const swa_dut_v2_params* p, const swa_dut_v2_cache* c, int b) {
  if (fault("paged_table_row_stride")) return (int64_t)b * ((p->seq_lens[b] + c->page_size - 1) / c->page_size);
  return (int64_t)b * c->table_width;
}

/* The cache element offset of (position, kv head) of sequence b, or -1 when it has no slot. */
static int64_t cache_offset(const swa_dut_v2_params* p, const swa_dut_v2_cache* c, int b, int64_t pos, int g) {
  int64_t row;
  if (paged(c)) {
    const int64_t entry = table_row(p, c, b) + pos / c->page_size;
    if (entry >= (int64_t)p->batch * c->table_width) return -1;
    const int32_t page = c->page_table[entry];
    if (page < 0) return -1;
    row = (int64_t)page * c->page_size + pos % c->page_size;
  } else if (c->policy == SWA_DUT_LINEAR) {
    row = (int64_t)b * c->slots + pos;
  } else {
    const int64_t base = c->policy == SWA_DUT_RING_COMPACT ? c->base[b] : 0;
    if (pos < base) return -1;
    row = (int64_t)b * c->slots + (pos - base) % c->slots;
  }
  return (row * c->heads_kv + g) * c->head_size;
}

static size_t cache_elem(const swa_dut_v2_params* p) { return kv_format(p) == SWA_DUT_KV_DTYPE ? elem_bytes(p->dtype) : 1; }

/* Positions [s, e) of sequence b into the cache. */
static void write_rows(const swa_dut_v2_params* p, swa_dut_v2_cache* c, int b, int64_t s, int64_t e) {
  if (s >= e) return;
  if (c->policy == SWA_DUT_RING_COMPACT && c->tokens_written[b] == 0) {
    const int64_t k = fault("compact_base_from_total_length") ? p->seq_lens[b] : e - s;
    c->base[b] = fault("compact_base_zero") || k <= c->slots ? 0 : k - c->slots;
  }
  const size_t in = elem_bytes(p->dtype), ce = cache_elem(p);
  int64_t written = 0;
  for (int64_t pos = s; pos < e; ++pos)
    for (int g = 0; g < p->heads_kv; ++g) {
      const int64_t off = cache_offset(p, c, b, pos, g);
      if (off < 0) continue;
      written += g == 0;
      const char* k = (const char*)p->k + (kv_row(p, b, pos) * p->k_row_stride + g * p->k_head_stride) * in;
      const char* v = (const char*)p->v + (kv_row(p, b, pos) * p->v_row_stride + g * p->v_head_stride) * in;
      for (int d = 0; d < p->head_size; ++d) {
        if (kv_format(p) == SWA_DUT_KV_DTYPE) {
          store(p->dtype, c->k, off + d, load(p->dtype, k, d));
          store(p->dtype, c->v, off + d, load(p->dtype, v, d));
        } else {
          ((uint8_t*)c->k)[off + d] = fp8_store(p, load(p->dtype, k, d), p->k_descale);
          ((uint8_t*)c->v)[off + d] = fp8_store(p, load(p->dtype, v, d), p->v_descale);
        }
      }
      /* A prefetching writer that also fills the next slot with this row. */
      if (fault("writes_next_slot_too") && pos == e - 1 && c->policy == SWA_DUT_LINEAR && pos + 1 < c->slots)
        memcpy((char*)c->k + (off + (int64_t)c->heads_kv * c->head_size) * ce, (char*)c->k + off * ce, p->head_size * ce);
    }
  if (fault("paged_tokens_written_held_only") && paged(c)) c->tokens_written[b] += written;
  else if (fault("tokens_written_per_chunk")) c->tokens_written[b] = e - s;
  else c->tokens_written[b] = e;
}

/* ---- one query row: gather the visible keys, then an online softmax over tiles of 16 ------------- */
typedef struct {
  const void* k;
  const void* v;
  int fp8_code; /* 1: k and v point at FP8 codes in the cache */
} Key;

typedef struct {
  Key* keys;
  int64_t count, capacity;
} Keys;

static int add(Keys* ks, const void* k, const void* v, int code) {
  if (ks->count == ks->capacity) {
    const int64_t n = ks->capacity ? 2 * ks->capacity : 128;
    Key* grown = realloc(ks->keys, (size_t)n * sizeof *grown);
    if (!grown) return -1;
    ks->keys = grown;
    ks->capacity = n;
  }
  ks->keys[ks->count++] = (Key){k, v, code};
  return 0;
}

static float kv_value(const swa_dut_v2_params* p, const Key* key, int value, int d) {
  const void* row = value ? key->v : key->k;
  const float written = value ? p->v_descale : p->k_descale, read = value ? v_descale(p) : p->k_descale;
  if (kv_format(p) == SWA_DUT_KV_DTYPE) return load(p->dtype, row, d);
  if (fault("fp8_chunk_keys_unquantised") && !key->fp8_code && p->mode != SWA_DUT_PREFILL) return load(p->dtype, row, d);
  if (key->fp8_code) return fp8_load(p, ((const uint8_t*)row)[d], read);
  return fp8_load(p, fp8_store(p, load(p->dtype, row, d), written), read);
}

static float softcap_of(const swa_dut_v2_params* p) { return SWA_DUT_V2_HAS(p, swa_dut_v2_params, softcap) ? p->softcap : 0.0f; }

static float approx_tanh(float x) {
  if (!fault("softcap_rational_tanh")) return tanhf(x);
  const float y = x * (27.0f + x * x) / (27.0f + 9.0f * x * x);
  return y > 1.0f ? 1.0f : y < -1.0f ? -1.0f : y;
}

static float score(const swa_dut_v2_params* p, const char* q, const Key* key, int decoding) {
  float dot = 0.0f;
  if (fault("fp16_score_accumulation") && p->dtype != SWA_DUT_FP32) {
    _Float16 acc = 0;
    for (int d = 0; d < p->head_size; ++d) acc += (_Float16)(load(p->dtype, q, d) * kv_value(p, key, 0, d));
    dot = (float)acc;
  } else {
    for (int d = 0; d < p->head_size; ++d) dot += load(p->dtype, q, d) * kv_value(p, key, 0, d);
  }
  float scale = fault("wide_head_scale_fixed") && p->head_size > 128 ? 1.0f / sqrtf(128.0f) : p->scale;
  if (fault("decode_scale_squared") && decoding) scale *= p->scale;
  const float cap = softcap_of(p);
  if (cap > 0.0f && fault("softcap_before_scale")) return cap * approx_tanh(dot / cap) * scale;
  float s = dot * scale;
  if (cap > 0.0f) s = cap * approx_tanh(s / cap);
  if (cap > 0.0f && fault("softcap_twice")) s = cap * approx_tanh(s / cap);
  return s;
}

static float e(float x) { return fault("exp_base_two") ? exp2f(x) : expf(x); }

static void attend(const swa_dut_v2_params* p, const Keys* ks, int b, int64_t i, int h, int decoding) {
  const size_t in = elem_bytes(p->dtype);
  const int64_t row = p->seq_offsets[b] + i;
  const char* q = (const char*)p->q + (row * p->q_row_stride + h * p->q_head_stride) * in;
  char* out = (char*)p->out + (row * p->out_row_stride + h * p->out_head_stride) * in;
  const float* sinks = SWA_DUT_V2_HAS(p, swa_dut_v2_params, sinks) ? p->sinks : NULL;
  if (fault("sink_dropped_in_decode") && decoding) sinks = NULL;
  float acc[MAX_HEAD_SIZE], m = -INFINITY, l = 0.0f;
  memset(acc, 0, sizeof acc);
  if (sinks) {
    float sink = sinks[fault("sink_per_kv_head") ? kv_head(p, h) : h];
    if (fault("sink_scaled")) sink *= p->scale;
    if (fault("sink_logit_negated")) sink = -sink;
    m = sink;
    l = 1.0f; /* exp(sink - m) */
  }
  for (int64_t t = 0; t < ks->count; t += KEY_TILE) {
    float s[KEY_TILE];
    const int64_t n = ks->count - t < KEY_TILE ? ks->count - t : KEY_TILE;
    /* The tile's padding: -inf, or 0 (a zero-initialised score tile whose V rows are zero). */
    const int64_t width = fault("tile_padding_scored_zero") ? KEY_TILE : n;
    float tile_max = -INFINITY;
    for (int64_t k = 0; k < width; ++k) {
      s[k] = k < n ? score(p, q, &ks->keys[t + k], decoding) : 0.0f;
      if (s[k] > tile_max) tile_max = s[k];
    }
    const float m_new = tile_max > m ? tile_max : m, correction = e(m - m_new);
    l *= correction;
    for (int d = 0; d < p->head_size; ++d) acc[d] *= correction;
    for (int64_t k = 0; k < width; ++k) {
      const float w = e(s[k] - m_new);
      l += w;
      if (k < n)
        for (int d = 0; d < p->head_size; ++d) acc[d] += w * kv_value(p, &ks->keys[t + k], 1, d);
    }
    m = m_new;
  }
  const int tail_from = fault("head_dim_tail_zero") ? p->head_size / 64 * 64 : p->head_size;
  for (int d = 0; d < p->head_size; ++d)
    store(p->dtype, out, d, ks->count == 0 || (d >= tail_from && tail_from > 0) ? 0.0f : acc[d] / l);
}

static const void* input_row(const swa_dut_v2_params* p, const void* base, int64_t rs, int64_t hs, int b, int64_t pos, int g) {
  return (const char*)base + (kv_row(p, b, pos) * rs + g * hs) * elem_bytes(p->dtype);
}

/* Whether row i, in a call whose own rows start at s, reads key j. */
static int reads(const swa_dut_v2_params* p, int64_t i, int64_t j, int64_t s) {
  /* A chunk whose lower window edge is its first row's, for every row of the chunk. */
  if (fault("chunk_window_from_chunk_start") && p->mode != SWA_DUT_PREFILL && p->window_left >= 0)
    return j >= s - p->window_left && j <= i;
  return visible(p, i, j);
}

/* Row i of sequence b: positions below `s` from the cache, [s, i] from this call's inputs. */
static int gather(const swa_dut_v2_params* p, const swa_dut_v2_cache* c, Keys* ks, int b, int64_t i, int h, int64_t s) {
  const int decoding = s == i + 1;
  const int g = fault("decode_gqa_modulo") && decoding ? h % p->heads_kv : kv_head(p, h);
  const size_t ce = cache_elem(p);
  const int code = kv_format(p) != SWA_DUT_KV_DTYPE;
  int64_t cached_end = s;
  if (fault("chunk_prev_last_key_missing") && p->mode != SWA_DUT_PREFILL && !decoding) --cached_end;
  if (fault("decode_own_key_missing") && decoding) --cached_end;
  ks->count = 0;
  for (int64_t j = 0; j < cached_end; ++j) {
    if (!reads(p, i, j, decoding ? i : s)) continue;
    const int64_t off = cache_offset(p, c, b, j, g);
    if (off < 0) continue;
    if (add(ks, (const char*)c->k + off * ce, (const char*)c->v + off * ce, code)) return -1;
  }
  for (int64_t j = s; j <= i; ++j)
    if (reads(p, i, j, s) && add(ks, input_row(p, p->k, p->k_row_stride, p->k_head_stride, b, j, g),
                                 input_row(p, p->v, p->v_row_stride, p->v_head_stride, b, j, g), 0))
      return -1;
  return 0;
}

static int fail(swa_dut_v2_status* st, Keys* ks, const char* what) {
  free(ks->keys);
  st->code = 1;
  snprintf(st->message, sizeof st->message, "fault_kernel: %s", what);
  return 1;
}

static int64_t prompt_len(const swa_dut_v2_params* p, int b) {
  return p->mode == SWA_DUT_DECODE ? p->seq_lens[b] - p->decode_steps : p->seq_lens[b];
}

/* ---- the ABI --------------------------------------------------------------------------------------- */
uint32_t swa_dut_v2_abi_version(void) { return SWA_DUT_V2_ABI_VERSION; }

int swa_dut_v2_describe(swa_dut_v2_traits* t) {
  fp8_init();
  t->params_size = sizeof(swa_dut_v2_params);
  snprintf(t->name, sizeof t->name, "fault:%s", SWA_FAULT);
  t->key_tile = KEY_TILE;
  t->query_tile = 1;
  return 0;
}

int swa_dut_v2_supports(const swa_dut_v2_params* p, swa_dut_v2_status* st) {
  if (p->head_size > MAX_HEAD_SIZE) {
    snprintf(st->message, sizeof st->message, "head sizes up to %d", MAX_HEAD_SIZE);
    return 0;
  }
  if (p->heads_kv <= 0 || p->heads_q % p->heads_kv) {
    snprintf(st->message, sizeof st->message, "heads_q must be a multiple of heads_kv");
    return 0;
  }
  return 1;
}

int swa_dut_v2_prefill(const swa_dut_v2_params* p, swa_dut_v2_status* st) {
  Keys ks = {0};
  for (int b = 0; b < p->batch; ++b)
    for (int64_t i = 0; i < p->seq_lens[b]; ++i)
      for (int h = 0; h < p->heads_q; ++h) {
        if (gather(p, NULL, &ks, b, i, h, 0)) return fail(st, &ks, "out of memory");
        /* prefill: every key is in this call's inputs, the two-sided window's future keys too; a
         * causal mask applied per 16-row query tile lets a row see the keys up to its tile's end */
        const int64_t tile_end = i / KEY_TILE * KEY_TILE + KEY_TILE - 1;
        for (int64_t j = i + 1; j < p->seq_lens[b]; ++j)
          if ((visible(p, i, j) || (fault("causal_tile_leak") && p->window_right == 0 && j <= tile_end)) && add(&ks, input_row(p, p->k, p->k_row_stride, p->k_head_stride, b, j, kv_head(p, h)),
                                      input_row(p, p->v, p->v_row_stride, p->v_head_stride, b, j, kv_head(p, h)), 0))
            return fail(st, &ks, "out of memory");
        attend(p, &ks, b, i, h, 0);
      }
  free(ks.keys);
  return 0;
}

int swa_dut_v2_chunked_prefill(const swa_dut_v2_params* p, swa_dut_v2_cache* c, int chunk_index, swa_dut_v2_status* st) {
  Keys ks = {0};
  for (int b = 0; b < p->batch; ++b) {
    const int64_t prompt = prompt_len(p, b), chunk = p->chunk > 0 ? p->chunk : prompt;
    const int64_t s = (int64_t)chunk_index * chunk < prompt ? (int64_t)chunk_index * chunk : prompt;
    const int64_t e = s + chunk < prompt ? s + chunk : prompt;
    for (int64_t i = s; i < e; ++i)
      for (int h = 0; h < p->heads_q; ++h) {
        if (gather(p, c, &ks, b, i, h, s)) return fail(st, &ks, "out of memory");
        attend(p, &ks, b, i, h, 0);
      }
    if (fault("chunked_last_chunk_unwritten") && p->mode == SWA_DUT_CHUNKED_PREFILL && e == prompt && s > 0) continue;
    write_rows(p, c, b, s, e);
  }
  free(ks.keys);
  return 0;
}

int swa_dut_v2_decode_step(const swa_dut_v2_params* p, swa_dut_v2_cache* c, int step, swa_dut_v2_status* st) {
  Keys ks = {0};
  for (int b = 0; b < p->batch; ++b) {
    const int64_t i = (fault("decode_positions_from_seq0") ? prompt_len(p, 0) : prompt_len(p, b)) + step;
    if (i >= p->seq_lens[b]) continue;
    const int64_t before = c->tokens_written[b];
    write_rows(p, c, b, i, i + 1);
    if (fault("decode_tokens_written_stale")) c->tokens_written[b] = before;
    for (int h = 0; h < p->heads_q; ++h) {
      if (gather(p, c, &ks, b, i, h, i + 1)) return fail(st, &ks, "out of memory");
      attend(p, &ks, b, i, h, 1);
    }
  }
  free(ks.keys);
  return 0;
}
