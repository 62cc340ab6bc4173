/* The C example plugin (examples/c_plugin.c, ABI version 2) behind ABI version 1: the loader's tests
 * check with it that version-1 plugins still load and pass. Linked with a version script that
 * exports only the swa_dut_v1_* functions, as a plugin built against swa/dut_v1.h would. */
#include <stdio.h>
#include <string.h>

#include "swa/dut_v1.h"
#include "swa/dut_v2.h"

static swa_dut_v2_params v2_params(const swa_dut_v1_params* p) {
  swa_dut_v2_params c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.dtype = p->dtype;
  c.q = p->q, c.k = p->k, c.v = p->v, c.out = p->out;
  c.q_row_stride = p->q_row_stride, c.q_head_stride = p->q_head_stride;
  c.k_row_stride = p->k_row_stride, c.k_head_stride = p->k_head_stride;
  c.v_row_stride = p->v_row_stride, c.v_head_stride = p->v_head_stride;
  c.out_row_stride = p->out_row_stride, c.out_head_stride = p->out_head_stride;
  c.batch = p->batch, c.heads_q = p->heads_q, c.heads_kv = p->heads_kv, c.head_size = p->head_size;
  c.seq_lens = p->seq_lens, c.seq_offsets = p->seq_offsets;
  c.window_left = p->window_left, c.window_right = p->window_right, c.scale = p->scale;
  c.mode = p->mode, c.cache_policy = p->cache_policy, c.chunk = p->chunk, c.decode_steps = p->decode_steps;
  c.mask_format = p->mask_format, c.mask = p->mask, c.mask_rows = p->mask_rows;
  c.mask_effective_window = p->mask_effective_window, c.mask_block = p->mask_block;
  return c;
}

static swa_dut_v2_cache v2_cache(const swa_dut_v1_cache* c) {
  swa_dut_v2_cache o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.policy = c->policy, o.dtype = c->dtype, o.batch = c->batch, o.heads_kv = c->heads_kv;
  o.head_size = c->head_size, o.slots = c->slots;
  o.base = c->base, o.tokens_written = c->tokens_written, o.k = c->k, o.v = c->v;
  return o;
}

static int v1_result(int rc, const swa_dut_v2_status* s, swa_dut_v1_error* e) {
  e->code = s->code;
  snprintf(e->message, sizeof e->message, "%s", s->message);
  return rc;
}

uint32_t swa_dut_v1_abi_version(void) { return SWA_DUT_V1_ABI_VERSION; }

const char* swa_dut_v1_name(void) {
  swa_dut_v2_traits t;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  swa_dut_v2_describe(&t);
  return "c_plugin_v1";
}

int swa_dut_v1_supports(const swa_dut_v1_params* p, char* reason, size_t reason_len) {
  const swa_dut_v2_params c = v2_params(p);
  swa_dut_v2_status s;
  memset(&s, 0, sizeof s);
  const int run = swa_dut_v2_supports(&c, &s);
  snprintf(reason, reason_len, "%s", s.message);
  return run;
}

int swa_dut_v1_prefill(const swa_dut_v1_params* p, swa_dut_v1_error* e) {
  const swa_dut_v2_params c = v2_params(p);
  swa_dut_v2_status s;
  memset(&s, 0, sizeof s);
  return v1_result(swa_dut_v2_prefill(&c, &s), &s, e);
}

int swa_dut_v1_chunked_prefill(const swa_dut_v1_params* p, swa_dut_v1_cache* cache, int chunk_index,
                               swa_dut_v1_error* e) {
  const swa_dut_v2_params c = v2_params(p);
  swa_dut_v2_cache k = v2_cache(cache);
  swa_dut_v2_status s;
  memset(&s, 0, sizeof s);
  return v1_result(swa_dut_v2_chunked_prefill(&c, &k, chunk_index, &s), &s, e);
}

int swa_dut_v1_decode_step(const swa_dut_v1_params* p, swa_dut_v1_cache* cache, int step, swa_dut_v1_error* e) {
  const swa_dut_v2_params c = v2_params(p);
  swa_dut_v2_cache k = v2_cache(cache);
  swa_dut_v2_status s;
  memset(&s, 0, sizeof s);
  return v1_result(swa_dut_v2_decode_step(&c, &k, step, &s), &s, e);
}
