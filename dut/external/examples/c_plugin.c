/* A plugin DUT in plain C, written from swa/dut_v2.h alone: the template an outside team copies.
 *
 *   swa-harness run scenarios/ci.yaml --dut plugin:/abs/path/libswa_c_plugin.so
 *
 * One query row at a time, fp32 accumulation, softmax with the row max subtracted, output rounded
 * to the storage dtype. Prefill reads K/V from the inputs; chunked prefill and decode read earlier
 * positions from the harness's cache and write each chunk (or decode token) into it in order.
 * Visibility is the window band; an SWA_NORM mask is read as a pattern (nonzero hides the key), an
 * SWA_COMPRESS mask encodes the same band and is not read. With an FP8 KV format (2.2) the cache
 * holds FP8 codes and every K/V value goes through fp8(x / descale) * descale. With a paged cache
 * (2.3) a position's slot is found through the page table the harness keeps.
 *
 * SWA_C_PLUGIN_FAULT=window_plus_one|cache_slot_shift makes it a wrong kernel on purpose, for the
 * harness's own tests: W+1 keys, or every ring write one slot late (read back consistently, so
 * the outputs stay right and only the cache is wrong).
 * SWA_C_PLUGIN_LOG_LOADS=FILE appends a line to FILE each time the plugin is loaded (a worker's stderr
 * is the harness's to keep, not the console's).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swa/dut_v2.h"

static int fault(const char* name) {
  const char* f = getenv("SWA_C_PLUGIN_FAULT");
  return f && strcmp(f, name) == 0;
}

/* ---- storage dtypes ------------------------------------------------------------------------ */
static float load(int32_t dtype, const void* base, int64_t i) {
  if (dtype == SWA_DUT_FP32) return ((const float*)base)[i];
  if (dtype == SWA_DUT_FP16) return (float)((const _Float16*)base)[i];
  uint32_t u = (uint32_t)((const uint16_t*)base)[i] << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void store(int32_t dtype, void* base, int64_t i, float x) {
  if (dtype == SWA_DUT_FP32) {
    ((float*)base)[i] = x;
  } else if (dtype == SWA_DUT_FP16) {
    ((_Float16*)base)[i] = (_Float16)x; /* round to nearest even */
  } else {
    uint32_t u;
    memcpy(&u, &x, 4);
    if (isnan(x)) u = 0x7fc00000u;
    else u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    ((uint16_t*)base)[i] = (uint16_t)(u >> 16);
  }
}

static size_t dtype_bytes(int32_t dtype) { return dtype == SWA_DUT_FP32 ? 4 : 2; }

/* ---- FP8 KV (2.2) ---------------------------------------------------------------------------- */
static int32_t kv_format(const swa_dut_v2_params* p) {
  return SWA_DUT_V2_HAS(p, swa_dut_v2_params, v_descale) ? p->kv_format : SWA_DUT_KV_DTYPE;
}

static float fp8_decode(uint8_t c, int32_t format) {
  const int e4m3 = format == SWA_DUT_KV_FP8_E4M3, m_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int e = (c & 0x7f) >> m_bits, m = c & ((1 << m_bits) - 1);
  const float sign = (c & 0x80) ? -1.0f : 1.0f;
  if (e4m3 && e == 15 && m == 7) return NAN;
  if (!e4m3 && e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * ldexpf((float)m, 1 - bias - m_bits);
  return sign * ldexpf((float)((1 << m_bits) + m), e - bias - m_bits);
}

/* Round to a multiple of the spacing at x's exponent (nearest even: rintf in the default rounding
 * mode), clamp to the largest finite value, then read the fields off the result. */
static uint8_t fp8_encode(float x, int32_t format) {
  const int e4m3 = format == SWA_DUT_KV_FP8_E4M3, m_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const float largest = e4m3 ? 448.0f : 57344.0f;
  if (isnan(x)) return 0x7f;
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  float a = fabsf(x);
  int e;
  if (isinf(a) || a >= 2 * largest) {
    a = largest;
  } else {
    frexpf(a, &e);
    if (e - 1 < 1 - bias) e = 2 - bias; /* below the smallest normal: the subnormal spacing */
    a = ldexpf(rintf(ldexpf(a, m_bits - (e - 1))), (e - 1) - m_bits);
    if (a > largest) a = largest;
  }
  if (a < ldexpf(1.0f, 1 - bias)) return (uint8_t)(sign | (int)ldexpf(a, bias - 1 + m_bits));
  frexpf(a, &e);
  return (uint8_t)(sign | ((e - 1 + bias) << m_bits) | ((int)ldexpf(a, m_bits - (e - 1)) - (1 << m_bits)));
}

/* K or V element d as attention reads it: a cache row holds FP8 codes, an input row is quantised. */
static float kv_load(const swa_dut_v2_params* p, const void* row, int cached, int d, float descale) {
  const int32_t f = kv_format(p);
  if (f == SWA_DUT_KV_DTYPE) return load(p->dtype, row, d);
  if (cached) return fp8_decode(((const uint8_t*)row)[d], f) * descale;
  return fp8_decode(fp8_encode(load(p->dtype, row, d) / descale, f), f) * descale;
}

/* ---- visibility ------------------------------------------------------------------------------ */
static int64_t window_left(const swa_dut_v2_params* p) {
  return p->window_left >= 0 && fault("window_plus_one") ? p->window_left + 1 : p->window_left;
}

static int visible(const swa_dut_v2_params* p, int64_t i, int64_t j) {
  const int64_t d = i - j, left = window_left(p);
  if (left >= 0 && d > left) return 0;
  if (p->window_right >= 0 && -d > p->window_right) return 0;
  if (p->mode == SWA_DUT_PREFILL && p->mask && p->mask_format == SWA_DUT_MASK_SWA_NORM)
    return i < p->mask_rows && j < p->mask_rows && p->mask[i * p->mask_rows + j] == 0.0f;
  return 1;
}

/* ---- the cache ------------------------------------------------------------------------------- */
static int64_t ring_slot(const swa_dut_v2_cache* c, int b, int64_t pos) {
  int64_t s = (pos - c->base[b]) % c->slots;
  if (s < 0) s += c->slots;
  if (fault("cache_slot_shift")) s = (s + 1) % c->slots;
  return s;
}

static int paged(const swa_dut_v2_cache* c) { return c->policy == SWA_DUT_PAGED; }

/* Paged: the physical page holding slot (= position) `slot` of sequence b, -1 when none. */
static int32_t page_of(const swa_dut_v2_cache* c, int b, int64_t slot) {
  return c->page_table[b * c->table_width + slot / c->page_size];
}

static int64_t slot_of(const swa_dut_v2_cache* c, int b, int64_t pos) {
  return c->policy == SWA_DUT_LINEAR || paged(c) ? pos : ring_slot(c, b, pos);
}

/* Element offset of (slot, head); a paged slot's page must be held. */
static size_t cache_offset(const swa_dut_v2_cache* c, int b, int64_t slot, int head) {
  if (paged(c))
    return (((size_t)page_of(c, b, slot) * c->page_size + slot % c->page_size) * c->heads_kv + head) * c->head_size;
  return (((size_t)b * c->slots + slot) * c->heads_kv + head) * c->head_size;
}

static size_t cache_elem(const swa_dut_v2_params* p) { return kv_format(p) == SWA_DUT_KV_DTYPE ? dtype_bytes(p->dtype) : 1; }

/* Writes positions [s, e) of sequence b in order; the first write fixes a compact ring's base. */
static void write_cache(const swa_dut_v2_params* p, swa_dut_v2_cache* c, int b, int64_t s, int64_t e) {
  if (s >= e) return;
  if (c->tokens_written[b] == 0 && c->policy == SWA_DUT_RING_COMPACT) c->base[b] = e - s > c->slots ? e - s - c->slots : 0;
  const size_t elem = dtype_bytes(p->dtype);
  for (int64_t pos = s > c->base[b] ? s : c->base[b]; pos < e; ++pos) {
    const int64_t slot = slot_of(c, b, pos), row = p->seq_offsets[b] + pos;
    if (paged(c) && page_of(c, b, slot) < 0) continue; /* no page: no query will read it */
    for (int g = 0; g < p->heads_kv; ++g) {
      const char* k = (const char*)p->k + (row * p->k_row_stride + g * p->k_head_stride) * elem;
      const char* v = (const char*)p->v + (row * p->v_row_stride + g * p->v_head_stride) * elem;
      const size_t off = cache_offset(c, b, slot, g) * cache_elem(p);
      if (kv_format(p) == SWA_DUT_KV_DTYPE) {
        memcpy((char*)c->k + off, k, p->head_size * elem);
        memcpy((char*)c->v + off, v, p->head_size * elem);
      } else {
        for (int d = 0; d < p->head_size; ++d) {
          ((uint8_t*)c->k)[off + d] = fp8_encode(load(p->dtype, k, d) / p->k_descale, p->kv_format);
          ((uint8_t*)c->v)[off + d] = fp8_encode(load(p->dtype, v, d) / p->v_descale, p->kv_format);
        }
      }
    }
  }
  c->tokens_written[b] = e;
}

/* Position held by a cache slot of sequence b (every position below tokens_written was written in
 * order), or -1. */
static int64_t held_position(const swa_dut_v2_cache* c, int b, int64_t slot) {
  const int64_t newest = c->tokens_written[b] - 1;
  if (newest < 0) return -1;
  if (c->policy == SWA_DUT_LINEAR) return slot <= newest ? slot : -1;
  if (paged(c)) return slot <= newest && page_of(c, b, slot) >= 0 ? slot : -1;
  int64_t back = ring_slot(c, b, newest) - slot;
  if (back < 0) back += c->slots;
  return newest - back >= c->base[b] ? newest - back : -1;
}

/* ---- one query row --------------------------------------------------------------------------- */
typedef struct {
  float* scores;
  const void** keys;
  const void** values;
  unsigned char* cached; /* 1: the key's rows are in the cache */
  int64_t count, capacity;
} Keys;

static void free_keys(Keys* ks) { free(ks->scores), free(ks->keys), free(ks->values), free(ks->cached); }

static int add_key(Keys* ks, const void* k, const void* v, int cached) {
  if (ks->count == ks->capacity) {
    const int64_t cap = ks->capacity ? 2 * ks->capacity : 256;
    void* a = realloc(ks->keys, cap * sizeof *ks->keys);
    if (!a) return -1;
    ks->keys = a;
    void* b = realloc(ks->values, cap * sizeof *ks->values);
    if (!b) return -1;
    ks->values = b;
    void* s = realloc(ks->scores, cap * sizeof *ks->scores);
    if (!s) return -1;
    ks->scores = s;
    void* c = realloc(ks->cached, cap);
    if (!c) return -1;
    ks->cached = c;
    ks->capacity = cap;
  }
  ks->cached[ks->count] = (unsigned char)cached;
  ks->keys[ks->count] = k;
  ks->values[ks->count] = v;
  ++ks->count;
  return 0;
}

/* softmax(cap(scale q.k), sink) v over the collected keys; a row with no visible key outputs 0.
 * softcap and sinks are 2.1 fields: read only when the harness's struct has them. */
static void attend(const swa_dut_v2_params* p, Keys* ks, int b, int64_t i, int h) {
  const int32_t dt = p->dtype;
  const size_t elem = dtype_bytes(dt);
  const int64_t row = p->seq_offsets[b] + i;
  const char* q = (const char*)p->q + (row * p->q_row_stride + h * p->q_head_stride) * elem;
  const float cap = SWA_DUT_V2_HAS(p, swa_dut_v2_params, softcap) ? p->softcap : 0.0f;
  const float* sinks = SWA_DUT_V2_HAS(p, swa_dut_v2_params, sinks) ? p->sinks : NULL;
  float m = sinks ? sinks[h] : -INFINITY, sum = 0.0f;
  for (int64_t n = 0; n < ks->count; ++n) {
    float s = 0.0f;
    for (int d = 0; d < p->head_size; ++d) s += load(dt, q, d) * kv_load(p, ks->keys[n], ks->cached[n], d, p->k_descale);
    ks->scores[n] = s * p->scale;
    if (cap > 0.0f) ks->scores[n] = cap * tanhf(ks->scores[n] / cap);
    if (ks->scores[n] > m) m = ks->scores[n];
  }
  if (sinks) sum = expf(sinks[h] - m);
  for (int64_t n = 0; n < ks->count; ++n) sum += (ks->scores[n] = expf(ks->scores[n] - m));
  char* out = (char*)p->out + (row * p->out_row_stride + h * p->out_head_stride) * elem;
  for (int d = 0; d < p->head_size; ++d) {
    float acc = 0.0f;
    for (int64_t n = 0; n < ks->count; ++n) acc += ks->scores[n] * kv_load(p, ks->values[n], ks->cached[n], d, p->v_descale);
    store(dt, out, d, ks->count ? acc / sum : 0.0f);
  }
}

static int kv_head(const swa_dut_v2_params* p, int h) { return h / (p->heads_q / p->heads_kv); }

static const void* input_row(const swa_dut_v2_params* p, const void* base, int64_t row_stride, int64_t head_stride,
                             int b, int64_t pos, int head) {
  return (const char*)base + ((p->seq_offsets[b] + pos) * row_stride + head * head_stride) * dtype_bytes(p->dtype);
}

/* Row i of sequence b, head h: visible cache slots, then the rows [s, i] of the current chunk. */
static int row_from_cache(const swa_dut_v2_params* p, const swa_dut_v2_cache* c, Keys* ks, int b, int64_t i, int h,
                          int64_t s) {
  const int g = kv_head(p, h);
  const size_t elem = cache_elem(p);
  ks->count = 0;
  for (int64_t slot = 0; slot < c->slots; ++slot) {
    const int64_t pos = held_position(c, b, slot);
    if (pos < 0 || pos >= s || !visible(p, i, pos)) continue;
    const size_t off = cache_offset(c, b, slot, g) * elem;
    if (add_key(ks, (const char*)c->k + off, (const char*)c->v + off, 1)) return -1;
  }
  for (int64_t j = s; j <= i; ++j)
    if (visible(p, i, j) &&
        add_key(ks, input_row(p, p->k, p->k_row_stride, p->k_head_stride, b, j, g),
                input_row(p, p->v, p->v_row_stride, p->v_head_stride, b, j, g), 0))
      return -1;
  attend(p, ks, b, i, h);
  return 0;
}

static int out_of_memory(swa_dut_v2_status* e, Keys* ks) {
  free_keys(ks);
  e->code = 12;
  snprintf(e->message, sizeof e->message, "c_plugin: out of memory");
  return 1;
}

static int64_t prompt_len(const swa_dut_v2_params* p, int b) {
  return p->mode == SWA_DUT_DECODE ? p->seq_lens[b] - p->decode_steps : p->seq_lens[b];
}

/* ---- the ABI --------------------------------------------------------------------------------- */
uint32_t swa_dut_v2_abi_version(void) { return SWA_DUT_V2_ABI_VERSION; }

/* Called once per load; SWA_C_PLUGIN_LOG_LOADS=FILE says so in FILE (the harness's tests count loads
 * with it). This kernel runs every dtype, mode, cache, mask and head size, so it states only its
 * name and the params it knows; a kernel with limits lists them here and the harness skips the rest. */
int swa_dut_v2_describe(swa_dut_v2_traits* traits) {
  const char* log_loads = getenv("SWA_C_PLUGIN_LOG_LOADS");
  if (log_loads) {
    FILE* log = fopen(log_loads, "a");
    if (log) {
      fputs("swa_c_plugin: loaded\n", log);
      fclose(log);
    }
  }
  traits->params_size = sizeof(swa_dut_v2_params);
  snprintf(traits->name, sizeof traits->name, "c_plugin");
  traits->query_tile = 1; /* one query row at a time */
  return 0;
}

int swa_dut_v2_supports(const swa_dut_v2_params* p, swa_dut_v2_status* status) {
  if (p->heads_kv <= 0 || p->heads_q % p->heads_kv != 0) {
    snprintf(status->message, sizeof status->message, "heads_q must be a multiple of heads_kv");
    return 0;
  }
  if (p->window_right != 0 && p->mode != SWA_DUT_PREFILL) {
    snprintf(status->message, sizeof status->message, "keys after the query exist in prefill only");
    return 0;
  }
  return 1;
}

int swa_dut_v2_prefill(const swa_dut_v2_params* p, swa_dut_v2_status* status) {
  Keys ks = {0};
  for (int b = 0; b < p->batch; ++b)
    for (int64_t i = 0; i < p->seq_lens[b]; ++i)
      for (int h = 0; h < p->heads_q; ++h) {
        const int g = kv_head(p, h);
        ks.count = 0;
        for (int64_t j = 0; j < p->seq_lens[b]; ++j)
          if (visible(p, i, j) && add_key(&ks, input_row(p, p->k, p->k_row_stride, p->k_head_stride, b, j, g),
                                          input_row(p, p->v, p->v_row_stride, p->v_head_stride, b, j, g), 0))
            return out_of_memory(status, &ks);
        attend(p, &ks, b, i, h);
      }
  free_keys(&ks);
  return 0;
}

int swa_dut_v2_chunked_prefill(const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int chunk_index,
                               swa_dut_v2_status* status) {
  Keys ks = {0};
  for (int b = 0; b < p->batch; ++b) {
    const int64_t prompt = prompt_len(p, b), chunk = p->chunk > 0 ? p->chunk : prompt;
    int64_t s = (int64_t)chunk_index * chunk, e = s + chunk;
    if (s > prompt) s = prompt;
    if (e > prompt) e = prompt;
    for (int64_t i = s; i < e; ++i)
      for (int h = 0; h < p->heads_q; ++h)
        if (row_from_cache(p, cache, &ks, b, i, h, s)) return out_of_memory(status, &ks);
    write_cache(p, cache, b, s, e);
  }
  free_keys(&ks);
  return 0;
}

int swa_dut_v2_decode_step(const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int step, swa_dut_v2_status* status) {
  Keys ks = {0};
  for (int b = 0; b < p->batch; ++b) {
    const int64_t i = prompt_len(p, b) + step;
    write_cache(p, cache, b, i, i + 1);
    for (int h = 0; h < p->heads_q; ++h)
      if (row_from_cache(p, cache, &ks, b, i, h, i + 1)) return out_of_memory(status, &ks);
  }
  free_keys(&ks);
  return 0;
}
