/* swa-harness external DUT ABI, version 1 (C, stable). Superseded by swa/dut_v2.h (versioned
 * structs, a describe call, kernel timings); plugins written for version 1 still load.
 *
 * A plugin is a shared library exporting the six functions below; load it with
 *   swa-harness run SWEEP.yaml --dut plugin:/path/to/libmydut.so
 * The harness loads it in a worker process (swa-dut-worker; --in-process: into the harness itself),
 * checks swa_dut_v1_abi_version() == SWA_DUT_V1_ABI_VERSION, and calls it from one thread at a time
 * per process. Each worker loads the library once and serves many scenarios; with --jobs N there may
 * be N workers. A crash, an abort or a call over --dut-timeout fails that scenario only.
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
 * Masks. mask_format says which ATB mask type the operator was configured with; mask may still be
 * NULL (decode: ATB's DECODER takes no mask tensor), and then the band alone decides. With a mask:
 * - it is a visibility pattern: 0 = visible, ANY nonzero value hides the key. Never add it to the
 *   scores: the bf16 mask's fill is +1, so adding it leaves hidden keys visible (the harness has a
 *   mutant that does this, and fails). The harness's masks encode the same band as
 *   window_left/window_right, so a kernel may use the band to pick tiles and the mask inside them
 *   (the reference CPU kernel does) or the mask alone.
 * - SWA_NORM: [mask_rows, mask_rows] float, row = query position, column = key position, both
 *   absolute positions within the sequence (every sequence reads the same top-left corner).
 * - SWA_COMPRESS: [512, 512] float, row stride 512, read tile by tile. With W = window_left + 1,
 *   B = mask_block (use it as given) and T = mask_effective_window, a tile of queries at absolute
 *   positions [qt*B, qt*B + B) of one sequence against keys [kt*B, kt*B + B) of the same sequence,
 *   tile distance d = (qt - kt) * B:
 *     1. kt > qt, or every pair at distance >= W: hidden, do not read;
 *     2. qt == kt: read rows [0, B), columns [0, B) (the top-left block);
 *     3. every pair at distance in [0, W): visible, do not read;
 *     4. otherwise: read rows [d - (W - T), d - (W - T) + B), columns [0, B).
 *   Rows r and columns c inside the tile index the block read. W - T is a multiple of B and every
 *   read stays inside the 512 rows for the (B, T) the harness sends; a read outside is a bug in the
 *   kernel's tile walk. The rule assumes tiles start at multiples of B from position 0, which is
 *   not so in chunked prefill: return 0 from swa_dut_v1_supports for SWA_COMPRESS there (the
 *   harness records a skip), as the reference kernels do.
 *
 * Window sides. The harness's scenarios send window_right = 0 (causal sliding windows). A band with
 * window_right != 0 (keys after the query) is defined for PREFILL only; in CHUNKED_PREFILL and DECODE
 * the keys after a query are not written yet, so return 0 from swa_dut_v1_supports there.
 *
 * Outputs. Every element of out for the rows a call owns is written, rounded to the storage dtype
 * with round-to-nearest-even. A row that sees no key is 0 (as FlashAttention; the golden agrees). The
 * harness fills out with NaN before the schedule: a row never written fails. nTokens is not passed:
 * it is seq_offsets[batch]. scale multiplies q.k before the softmax (usually 1/sqrt(head_size)).
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

/* The same constants as version 2 (both headers may be included together). */
#ifndef SWA_DUT_ENUMS_DEFINED
#define SWA_DUT_ENUMS_DEFINED
enum swa_dut_v1_dtype { SWA_DUT_FP32 = 0, SWA_DUT_FP16 = 1, SWA_DUT_BF16 = 2 };
enum swa_dut_v1_mode { SWA_DUT_PREFILL = 0, SWA_DUT_CHUNKED_PREFILL = 1, SWA_DUT_DECODE = 2 };
enum swa_dut_v1_cache_policy { SWA_DUT_RING_MODULO = 0, SWA_DUT_RING_COMPACT = 1, SWA_DUT_LINEAR = 2 };
enum swa_dut_v1_mask_format { SWA_DUT_MASK_NONE = 0, SWA_DUT_MASK_SWA_NORM = 1, SWA_DUT_MASK_SWA_COMPRESS = 2 };
#endif

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
