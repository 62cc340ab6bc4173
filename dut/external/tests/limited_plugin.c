/* The C example plugin (examples/c_plugin.c) describing itself with limits, for the loader's tests:
 * fp32 only, prefill and chunked prefill only, head sizes 64 and 128 only, a private cache layout,
 * built as if against swa/dut_v2.h 2.0 (params_size ends before softcap and sinks), and its own
 * timing of every call (CLOCK_MONOTONIC around the kernel). The example's describe and
 * compute functions are renamed at compile time (c_plugin_*, limited_kernel.c) and wrapped here. A call outside what
 * it describes is a bug in the harness: it fails loudly. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "swa/dut_v2.h"

int c_plugin_describe(swa_dut_v2_traits* traits);
int c_plugin_prefill(const swa_dut_v2_params* p, swa_dut_v2_status* status);
int c_plugin_chunked_prefill(const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int chunk_index,
                             swa_dut_v2_status* status);

int swa_dut_v2_describe(swa_dut_v2_traits* t) {
  const int rc = c_plugin_describe(t);
  /* A 2.0 plugin: params_size is 2.0's sizeof, with its tail padding, which is where 2.1's first
   * field begins. */
  t->params_size = offsetof(swa_dut_v2_params, sinks);
  snprintf(t->name, sizeof t->name, "limited");
  t->dtypes = 1u << SWA_DUT_FP32;
  t->modes = (1u << SWA_DUT_PREFILL) | (1u << SWA_DUT_CHUNKED_PREFILL);
  t->head_sizes[0] = 64;
  t->head_sizes[1] = 128;
  t->head_size_count = 2;
  t->times_own_kernels = 1;
  t->cache_private = 1;
  return rc;
}

static int outside(const swa_dut_v2_params* p, swa_dut_v2_status* s) {
  if (p->softcap != 0.0f || p->sinks != NULL) {
    snprintf(s->message, sizeof s->message, "limited: sent softcap or sinks, which its params_size (2.0) has not");
    return 1;
  }
  if (p->dtype == SWA_DUT_FP32 && p->mode != SWA_DUT_DECODE && (p->head_size == 64 || p->head_size == 128)) return 0;
  snprintf(s->message, sizeof s->message, "limited: called outside its traits (dtype %d, mode %d, head size %d)",
           p->dtype, p->mode, p->head_size);
  return 1;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

int swa_dut_v2_prefill(const swa_dut_v2_params* p, swa_dut_v2_status* status) {
  if (outside(p, status)) return 1;
  const double t0 = now_ms();
  const int rc = c_plugin_prefill(p, status);
  status->kernel_ms = now_ms() - t0;
  return rc;
}

int swa_dut_v2_chunked_prefill(const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int chunk_index,
                               swa_dut_v2_status* status) {
  if (outside(p, status)) return 1;
  const double t0 = now_ms();
  const int rc = c_plugin_chunked_prefill(p, cache, chunk_index, status);
  status->kernel_ms = now_ms() - t0;
  return rc;
}
