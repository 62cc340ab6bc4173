/* swa-harness external DUT ABI, version 1 (C, stable).
 *
 * A plugin is a shared library exporting the six functions below; load it with
 *   swa-harness run SWEEP.yaml --dut plugin:/path/to/libmydut.so
 * The harness dlopens it, checks swa_dut_v1_abi_version() == SWA_DUT_V1_ABI_VERSION, and calls it
 * from one thread at a time per loaded instance.
 *
 * Layout (all strides in elements, the last dimension contiguous): Q and the output are
 * [nTokens, heads_q, head_size], K and V [nTokens, heads_kv, head_size], sequence b at rows
 * [seq_offsets[b], seq_offsets[b] + seq_lens[b]); token t of a sequence has absolute position t.
 * Storage dtype: SWA_DUT_FP32 (IEEE float), SWA_DUT_FP16 (IEEE half), SWA_DUT_BF16 (bfloat16).
 *
 * Window: query position i sees key position j iff -window_right <= i - j <= window_left, a negative
 * bound meaning unbounded. A window of W keys including the query is (W - 1, 0); causal is (-1, 0).
 * GQA: query head h reads kv head h / (heads_q / heads_kv).
 *
 * Schedule: mode PREFILL computes every row with swa_dut_v1_prefill. CHUNKED_PREFILL calls
 * swa_dut_v1_chunked_prefill for chunk_index 0, 1, ...: rows [c*chunk, min((c+1)*chunk, prompt)) of
 * each sequence attend to the cache plus the chunk, then the chunk's K/V are written into the cache.
 * DECODE: the prompt (seq_lens[b] - decode_steps tokens) through chunked_prefill in chunks of
 * `chunk` tokens (only chunk == 0 means the whole prompt as one chunk), then swa_dut_v1_decode_step
 * for step 0..decode_steps-1: row prompt + step of each sequence writes its K/V into the cache,
 * then attends to the cache. A sequence whose prompt ends before chunk_index * chunk has nothing
 * to do at that index.
 *
 * Cache: k and v are [batch, slots, heads_kv, head_size] in the storage dtype, owned by the harness.
 * LINEAR: slots = longest sequence, slot = position. RING_MODULO: slots = W, slot = p mod W.
 * RING_COMPACT (the ring-cache patent): slots = W, slot = (p - base[b]) mod W, where base[b] is set
 * by the DUT at the sequence's first write of k tokens: max(0, k - W); positions below base are not
 * stored. tokens_written[b] counts positions [0, tokens_written[b]) written; the DUT updates it.
 * The cache starts zeroed. It is part of the contract, as in ATB and serving stacks where other
 * kernels read it: after every chunk and decode step the harness compares it with its golden cache
 * model (slot by slot, bit for bit in the storage dtype, plus base and tokens_written); a slot that
 * holds the wrong position fails the scenario even when the outputs are right, and a slot never
 * written must stay zero. (`--no-cache-check` or `cache_check: false` for a private layout.)
 *
 * Masks (mask != NULL): mask_format SWA_NORM is [mask_rows, mask_rows] float over absolute positions,
 * SWA_COMPRESS is [512, 512] read tile by tile with block mask_block and effective window
 * mask_effective_window (golden/README.md, "tile-walk rule"). The mask is a visibility pattern:
 * 0 = visible, ANY nonzero value hides the key. Never add it to the scores: the bf16 mask's fill is
 * +1, so adding it leaves hidden keys visible (the harness has a mutant that does this, and fails).
 *
 * Errors: a function returns 0 on success, nonzero on failure with a message in error->message.
 */
#ifndef SWA_DUT_V1_H
#define SWA_DUT_V1_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SWA_DUT_V1_ABI_VERSION 1u

enum swa_dut_v1_dtype { SWA_DUT_FP32 = 0, SWA_DUT_FP16 = 1, SWA_DUT_BF16 = 2 };
enum swa_dut_v1_mode { SWA_DUT_PREFILL = 0, SWA_DUT_CHUNKED_PREFILL = 1, SWA_DUT_DECODE = 2 };
enum swa_dut_v1_cache_policy { SWA_DUT_RING_MODULO = 0, SWA_DUT_RING_COMPACT = 1, SWA_DUT_LINEAR = 2 };
enum swa_dut_v1_mask_format { SWA_DUT_MASK_NONE = 0, SWA_DUT_MASK_SWA_NORM = 1, SWA_DUT_MASK_SWA_COMPRESS = 2 };

typedef struct swa_dut_v1_params {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  int32_t dtype;
  int64_t q_row_stride, q_head_stride, k_row_stride, k_head_stride;
  int64_t v_row_stride, v_head_stride, out_row_stride, out_head_stride;
  int32_t batch;
  const int32_t* seq_lens;
  const int64_t* seq_offsets;
  int32_t heads_q, heads_kv, head_size;
  int64_t window_left, window_right;
  float scale;
  int32_t mode, cache_policy, chunk, decode_steps;
  int32_t mask_format;
  const float* mask;
  int64_t mask_rows;
  int32_t mask_block;
  int64_t mask_effective_window;
} swa_dut_v1_params;

typedef struct swa_dut_v1_cache {
  int32_t policy;
  int32_t dtype;
  int64_t slots;
  int32_t heads_kv, head_size, batch;
  int64_t* base;            /* [batch], compact ring base per sequence */
  int64_t* tokens_written;  /* [batch] */
  void* k;
  void* v;
} swa_dut_v1_cache;

typedef struct swa_dut_v1_error {
  int32_t code;
  char message[512];
} swa_dut_v1_error;

uint32_t swa_dut_v1_abi_version(void);
const char* swa_dut_v1_name(void);
/* 1: run it; 0: skip, with the reason in reason[0..reason_len). */
int swa_dut_v1_supports(const swa_dut_v1_params* p, char* reason, size_t reason_len);
int swa_dut_v1_prefill(const swa_dut_v1_params* p, swa_dut_v1_error* error);
int swa_dut_v1_chunked_prefill(const swa_dut_v1_params* p, swa_dut_v1_cache* cache, int chunk_index,
                               swa_dut_v1_error* error);
int swa_dut_v1_decode_step(const swa_dut_v1_params* p, swa_dut_v1_cache* cache, int step, swa_dut_v1_error* error);

#ifdef __cplusplus
}
#endif

#endif /* SWA_DUT_V1_H */
