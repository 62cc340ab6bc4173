/* swa-harness external DUT ABI, version 2.3 (C, stable). Everything a plugin needs is in this file.
 * 2.1 appended softcap and sinks to swa_dut_v2_params; a 2.0 plugin still loads and is not sent
 * cases that use them. 2.2 appended the FP8 KV cache (kv_format, k_descale, v_descale; the cache's
 * kv_format); a 2.0 or 2.1 plugin is not sent FP8 KV cases. 2.3 appended the paged KV cache
 * (page_size, pool_pages; the cache's page_size, pages, table_width, page_table); an older plugin is
 * not sent paged cases.
 *
 * A plugin is a shared library exporting the six functions at the end; load it with
 *   swa-harness run SWEEP.yaml --dut plugin:/abs/path/libmydut.so
 * dut/external/examples/c_plugin.c is a complete plugin in plain C written from this header alone.
 * The harness loads the library once per worker process (swa-dut-worker; --in-process: into the
 * harness itself, for gdb), checks swa_dut_v2_abi_version() == SWA_DUT_V2_ABI_VERSION, calls
 * swa_dut_v2_describe once, and then calls the plugin from one thread at a time per process. With
 * --jobs N there may be N workers. A crash, an abort or a call over --dut-timeout fails that
 * scenario only. Plugins written for version 1 (swa/dut_v1.h) still load.
 *
 * ---- Versioned structs ----------------------------------------------------------------------
 * Every struct starts with struct_size, set by whoever allocates it to sizeof the struct it was
 * compiled with. Later 2.x headers only append fields. So:
 *  - a field is there iff SWA_DUT_V2_HAS(ptr, type, field); a plugin never reads past struct_size;
 *  - swa_dut_v2_describe reports params_size = sizeof(swa_dut_v2_params) as the plugin knows it,
 *    and the harness never sends a plugin a case that needs a field beyond that size (it records
 *    a skip naming the field instead);
 *  - a field the plugin does not know is never silently ignored: see the previous point.
 *
 * ---- Tensors --------------------------------------------------------------------------------
 * Layout (all strides in elements, the last dimension contiguous): Q and the output are
 * [nTokens, heads_q, head_size], K and V [nTokens, heads_kv, head_size]. Sequence b occupies rows
 * [seq_offsets[b], seq_offsets[b] + seq_lens[b]); its token t has absolute position t (positions
 * restart at 0 in every sequence). nTokens is not passed: it is seq_offsets[batch].
 * Storage dtype: SWA_DUT_FP32 (IEEE float), SWA_DUT_FP16 (IEEE half), SWA_DUT_BF16 (bfloat16); the
 * cache has the same dtype. GQA: query head h reads kv head h / (heads_q / heads_kv).
 * scale multiplies q.k before the softmax (usually 1/sqrt(head_size)).
 *
 * ---- Which keys a query sees ----------------------------------------------------------------
 * Query position i sees key position j of the same sequence iff
 *     -window_right <= i - j <= window_left      (a negative bound means unbounded)
 * A window of W keys including the query is (W - 1, 0); plain causal attention is (-1, 0).
 * A two-sided window (window_right > 0, keys after the query: encoder-style local attention,
 * FlashAttention's window_size = (left, right)) comes in PREFILL only: in CHUNKED_PREFILL and
 * DECODE those keys are not written yet, and the harness never sends it there. The same holds for an
 * unbounded right side (window_right < 0): in CHUNKED_PREFILL and DECODE window_right is always
 * exactly 0 (the harness refuses any other case before a DUT sees it).
 *
 * ---- Outputs --------------------------------------------------------------------------------
 * out[i] = sum_j softmax_j(scale * q_i . k_j) v_j over the visible j. Every element of the rows a
 * call owns is written, rounded to the storage dtype with round-to-nearest-even. A row that sees
 * no key outputs 0 (as FlashAttention). The harness fills out with NaN before the schedule: a row
 * never written fails. Accumulate in at least fp32.
 *
 * ---- Score semantics (2.1: read them only if SWA_DUT_V2_HAS(p, swa_dut_v2_params, softcap), the
 * ---- later of 2.1's two fields; a 2.1 struct has both) ---------------------------------------
 * With s_j = scale * q_i . k_j (the scale first, as FlashAttention's softcap does):
 *   softcap > 0:  s_j = softcap * tanh(s_j / softcap)  for each visible key j (Gemma 2: 50). 0 = off.
 *                 The cap is per score, so capping before or after masking gives the same result:
 *                 a hidden key contributes nothing either way.
 *   sinks != NULL: sinks[h] (h = the query head; [heads_q] floats holding values of the storage
 *                 dtype) is one more logit in row i's softmax, with no value row (gpt-oss):
 *                   m = max(max_j s_j, sinks[h]),
 *                   out[i] = sum_j exp(s_j - m) v_j / (sum_j exp(s_j - m) + exp(sinks[h] - m)).
 *                 The sink is not capped. A row with no visible key still outputs 0.
 * A plugin that implements neither leaves its params_size at 2.0's size (see above) or returns 0
 * from swa_dut_v2_supports when softcap != 0 or sinks != NULL.
 *
 * ---- FP8 KV cache (2.2: read it only if SWA_DUT_V2_HAS(p, swa_dut_v2_params, v_descale)) --------
 * kv_format SWA_DUT_KV_FP8_E4M3 or SWA_DUT_KV_FP8_E5M2 (OCP FP8: e4m3 bias 7, largest 448, no
 * infinities, NaN 0x7f/0xff; e5m2 bias 15, largest 57344): q, k, v and out stay in the storage
 * dtype, and every K and V value attention reads, in every mode, is
 *     fp8(k / k_descale) * k_descale      (v with v_descale)
 * where fp8() rounds to nearest, ties to even, and SATURATES: a value beyond the largest finite one
 * (and +-inf) becomes +-largest (the OCP spec's saturating conversion; without it e4m3 gives NaN).
 * The descales are powers of two, so k / k_descale is exact in fp32. The product is NOT rounded
 * back to the storage dtype: it is exact in fp32 (an FP8 value times a power of two) and attention
 * uses it at fp32 or better, even where the storage dtype could not hold it (fp16 with e4m3 and
 * descale 256: 448 * 256 = 114688, beyond fp16's 65504, is that key's value, not inf). In PREFILL
 * that is a kernel that quantises K/V on load; in the other modes the cache holds the one-byte FP8
 * codes (uint8, cache->kv_format says so: [batch, slots, heads_kv, head_size] for LINEAR and the
 * rings, the page pool [pages, page_size, heads_kv, head_size] for PAGED) and the chunk's own keys
 * are read as the cache would give them back. kv_format SWA_DUT_KV_DTYPE (0): no FP8.
 *
 * ---- Paged KV cache (2.3: read it only if SWA_DUT_V2_HAS(p, swa_dut_v2_params, pool_pages)) -----
 * cache_policy SWA_DUT_PAGED: K/V live in pages of page_size positions in a pool the batch shares
 * (cache->k, cache->v: [pages, page_size, heads_kv, head_size]). Position p of sequence b is at
 * offset p % page_size of physical page cache->page_table[b * table_width + p / page_size]; -1 means
 * the sequence holds no page there (never taken, or freed: it lies wholly below the window of every
 * query still to come). The HARNESS takes and frees pages around each call, as a serving stack's
 * scheduler does around its kernels: when chunked_prefill or decode_step is called, the pages of the
 * rows it writes are already in page_table; write each row whose page is there (skip a row whose page
 * is -1: no query will see it), read keys through page_table, and leave page_table as it is. A freed
 * page may be given to another sequence and hold its K/V, and a newly taken page holds whatever its
 * last owner wrote: never read a position that is not written yet, and mask by position as always.
 * The cache check compares page_table and every held position's K/V after each call.
 *
 * ---- Schedule -------------------------------------------------------------------------------
 * mode PREFILL: one call of swa_dut_v2_prefill computes every row of every sequence from Q/K/V.
 * mode CHUNKED_PREFILL: chunk >= 1 (chunk 0 is refused by the harness in this mode), and
 *   swa_dut_v2_chunked_prefill for chunk_index 0, 1, ..., N - 1 with N = ceil(max_b seq_lens[b] /
 *   chunk) (the last index is the longest prompt's last chunk; no call is made past it): rows
 *   [c*chunk, min((c+1)*chunk, seq_lens[b])) of each sequence attend to the cache plus the chunk
 *   itself, then the chunk's K/V are written into the cache. A sequence whose prompt ends before
 *   chunk_index * chunk has nothing to do at that index (skip it; do not touch its cache).
 * mode DECODE: every prompt (seq_lens[b] - decode_steps tokens) has at least 1 token (the harness
 *   refuses a case with an empty prompt). The prompts go through chunked_prefill in chunks of
 *   `chunk` tokens, where only chunk == 0 means "the whole prompt as one chunk" (then N = 1); then
 *   swa_dut_v2_decode_step for step 0 .. decode_steps-1: row prompt + step of each sequence writes
 *   its K/V into the cache first, then attends to the cache.
 *
 * ---- The KV cache ---------------------------------------------------------------------------
 * k and v are [batch, slots, heads_kv, head_size] in the storage dtype (FP8 codes with an FP8
 * kv_format), owned by the harness and zeroed before the schedule. Which slot holds position p of sequence b:
 *   LINEAR:       slots = longest sequence, slot = p.
 *   RING_MODULO:  slots = W (window_left + 1), slot = p mod W.
 *   RING_COMPACT: slots = W, slot = (p - base[b]) mod W. base[b] is set by the DUT at the
 *                 sequence's first write, of k tokens: max(0, k - W); positions below base are
 *                 never stored (the ring-cache patent's layout).
 *   PAGED (2.3):  see "Paged KV cache"; k and v are the shared pool, not [batch, slots, ...].
 * tokens_written[b] counts positions [0, tokens_written[b]) written; the DUT updates it. With a
 * PAGED cache a position whose row was skipped (its page -1) counts as written too: tokens_written
 * is the end of what the sequence has been through, not the number of rows stored.
 * The cache is part of the contract, as in ATB and serving stacks where other kernels read it:
 * after every chunk and decode step the harness compares it with its golden cache model (slot by
 * slot, bit for bit, plus base and tokens_written). A slot holding the wrong position fails the
 * scenario even when the outputs are right; a slot never written must stay zero. Report
 * cache_private = 1 in the traits (or the user passes --no-cache-check) for a private layout.
 *
 * ---- Masks (the Ascend ATB SelfAttention mask types) ----------------------------------------
 * mask_format says which ATB mask type the operator was configured with. mask may still be NULL
 * (decode: ATB's DECODER takes no mask tensor); then the band alone decides. With a mask:
 * - It is a visibility pattern: 0 = visible, ANY nonzero value hides the key. Never add it to the
 *   scores: the bf16 mask's fill is +1, so adding it leaves hidden keys visible. The harness's
 *   masks encode the same band as window_left/window_right, so a kernel may use the band to pick
 *   tiles and the mask inside them, or the mask alone.
 * - SWA_NORM: [mask_rows, mask_rows] float, row = query position, column = key position (absolute
 *   positions within the sequence; every sequence reads the same top-left corner).
 * - SWA_COMPRESS: [512, 512] float, row stride 512, read tile by tile. With W = window_left + 1,
 *   B = mask_block (use it as given) and T = mask_effective_window, a tile of queries at absolute
 *   positions [qt*B, qt*B + B) of one sequence against keys [kt*B, kt*B + B) of the same sequence,
 *   tile distance d = (qt - kt) * B:
 *     1. kt > qt, or every pair at distance >= W: hidden, do not read;
 *     2. qt == kt: read rows [0, B), columns [0, B) (the top-left block);
 *     3. every pair at distance in [0, W): visible, do not read;
 *     4. otherwise: read rows [d - (W - T), d - (W - T) + B), columns [0, B).
 *   Row r and column c inside the tile index the block read. W - T is a multiple of B and every
 *   read stays inside the 512 rows for the (B, T) the harness sends; a read outside is a bug in the
 *   kernel's tile walk. The rule assumes tiles start at multiples of B from position 0, which is
 *   not so in chunked prefill: return 0 from supports for SWA_COMPRESS there.
 *
 * ---- Worked example -------------------------------------------------------------------------
 * batch 2, seq_lens {5, 3}, seq_offsets {0, 5, 8}, window (2, 0) so W = 3, mode DECODE,
 * decode_steps 1, chunk 2, cache RING_MODULO (slots 3):
 *   prompts are 4 and 2 tokens. chunked_prefill(chunk_index 0): rows 0-1 of seq 0 (out rows 0, 1)
 *   and rows 0-1 of seq 1 (out rows 5, 6); then positions 0, 1 of each go to slots 0, 1.
 *   chunked_prefill(1): seq 0 rows 2-3 (out rows 2, 3); row 3 sees positions 1, 2, 3: position 1
 *   from cache slot 1, positions 2, 3 from this chunk's K/V. Seq 1's prompt is done: skip it.
 *   Afterwards seq 0's slots hold positions {3, 1, 2} (slot = p mod 3), tokens_written {4, 2}.
 *   decode_step(0): seq 0 writes position 4 to slot 1, then row 4 (out row 4) attends to
 *   positions 2, 3, 4 from the cache; seq 1 writes position 2 to slot 2, row 2 (out row 7) attends
 *   to positions 0, 1, 2. tokens_written becomes {5, 3}.
 * With RING_COMPACT and chunk 0 the whole prompt is the first write: seq 0 writes 4 tokens, so
 * base = max(0, 4 - 3) = 1 and positions 1, 2, 3 land in slots 0, 1, 2.
 *
 * ---- Errors and timing ----------------------------------------------------------------------
 * A function returns 0 on success, nonzero on failure with a message in status->message (the
 * harness records an error row with it). supports returns 1 (run) or 0 (skip, the reason in
 * status->message). A plugin that times its own kernels (device time, without copies) sets
 * status->kernel_ms, which the harness sets to -1 before each call; perf mode then reports it.
 */
#ifndef SWA_DUT_V2_H
#define SWA_DUT_V2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SWA_DUT_V2_ABI_VERSION 2u
#define SWA_DUT_V2_MINOR_VERSION 3u /* 2.1: softcap, sinks; 2.2: FP8 KV cache; 2.3: paged KV cache */

/* Whether the struct behind `ptr` (of type `type`) has `field`: use before reading a field that a
 * later 2.x header appended. */
#define SWA_DUT_V2_HAS(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* The same constants as version 1 (both headers may be included together). */
#ifndef SWA_DUT_ENUMS_DEFINED
#define SWA_DUT_ENUMS_DEFINED
enum swa_dut_v2_dtype { SWA_DUT_FP32 = 0, SWA_DUT_FP16 = 1, SWA_DUT_BF16 = 2 };
enum swa_dut_v2_mode { SWA_DUT_PREFILL = 0, SWA_DUT_CHUNKED_PREFILL = 1, SWA_DUT_DECODE = 2 };
enum swa_dut_v2_cache_policy { SWA_DUT_RING_MODULO = 0, SWA_DUT_RING_COMPACT = 1, SWA_DUT_LINEAR = 2 };
enum swa_dut_v2_mask_format { SWA_DUT_MASK_NONE = 0, SWA_DUT_MASK_SWA_NORM = 1, SWA_DUT_MASK_SWA_COMPRESS = 2 };
#endif
enum swa_dut_v2_kv_format { SWA_DUT_KV_DTYPE = 0, SWA_DUT_KV_FP8_E4M3 = 1, SWA_DUT_KV_FP8_E5M2 = 2 };
enum swa_dut_v2_cache_policy_2_3 { SWA_DUT_PAGED = 3 }; /* 2.3: a cache_policy value (see "Paged KV cache") */

typedef struct swa_dut_v2_params {
  uint32_t struct_size; /* sizeof(swa_dut_v2_params) as the harness knows it */
  int32_t dtype;        /* enum swa_dut_v2_dtype */
  const void* q;
  const void* k;
  const void* v;
  void* out;
  int64_t q_row_stride, q_head_stride, k_row_stride, k_head_stride;
  int64_t v_row_stride, v_head_stride, out_row_stride, out_head_stride;
  int32_t batch;
  int32_t heads_q, heads_kv, head_size;
  const int32_t* seq_lens;    /* [batch] */
  const int64_t* seq_offsets; /* [batch + 1] */
  int64_t window_left, window_right;
  float scale;
  int32_t mode;         /* enum swa_dut_v2_mode */
  int32_t cache_policy; /* enum swa_dut_v2_cache_policy */
  int32_t chunk, decode_steps;
  int32_t mask_format; /* enum swa_dut_v2_mask_format */
  const float* mask;   /* may be NULL */
  int64_t mask_rows;
  int64_t mask_effective_window;
  int32_t mask_block;
  /* 2.1. Appended fields start past 2.0's padded size (208 on LP64: mask_block ends at 204, then 4
   * bytes of padding), so a 2.0 plugin's params_size never covers them; the pointer comes first for
   * that reason. */
  const float* sinks; /* [heads_q] sink logits, or NULL */
  float softcap;      /* > 0: cap the scaled scores (see "Score semantics"); 0 = off */
  /* 2.2. 2.1's padded size is 224 (LP64), so its first field starts at 224. */
  int32_t reserved_2_1; /* 2.1's tail padding: 0 */
  int32_t kv_format;    /* enum swa_dut_v2_kv_format (see "FP8 KV cache") */
  float k_descale;      /* FP8: K = code * k_descale; 1 otherwise */
  float v_descale;
  /* 2.3. 2.2's padded size is 240 (LP64: v_descale ends at 236), so its first field starts at 240. */
  int32_t reserved_2_2; /* 2.2's tail padding: 0 */
  int32_t page_size;  /* PAGED: positions per page; 0 otherwise */
  int32_t pool_pages; /* PAGED: pages in the pool the batch shares */
  /* Later 2.x headers append fields here, each ending past the previous version's sizeof. */
} swa_dut_v2_params;

typedef struct swa_dut_v2_cache {
  uint32_t struct_size;
  int32_t policy; /* enum swa_dut_v2_cache_policy */
  int32_t dtype;
  int32_t batch, heads_kv, head_size;
  int64_t slots;
  int64_t* base;           /* [batch], RING_COMPACT's base position per sequence; the DUT sets it */
  int64_t* tokens_written; /* [batch]; the DUT updates it */
  void* k;                 /* [batch, slots, heads_kv, head_size] */
  void* v;
  int32_t kv_format; /* 2.2: enum swa_dut_v2_kv_format; FP8: k and v hold one-byte codes */
  /* 2.3 (PAGED; see "Paged KV cache"): k and v are the pool [pages, page_size, heads_kv, head_size]. */
  int32_t page_size;
  int64_t pages;
  int64_t table_width;       /* logical pages per sequence; slots = table_width * page_size */
  int32_t* page_table;       /* [batch, table_width]: physical page of logical page j, -1 = none */
} swa_dut_v2_cache;

typedef struct swa_dut_v2_status {
  uint32_t struct_size;
  int32_t code;      /* the plugin's own error code, for the message */
  double kernel_ms;  /* -1 on entry; >= 0: the plugin's own timing of this call's kernels */
  char message[512]; /* why it failed, or (supports) why it skips */
} swa_dut_v2_status;

/* What a plugin says about itself, once per load. The harness zeroes it and sets struct_size; the
 * plugin fills what it knows and leaves the rest 0 ("not stated" / "any"). Used by the harness:
 * cases outside dtypes/modes/cache_policies/mask_formats/head_sizes are skipped without calling
 * the plugin; bisect reduces only to head sizes it runs and places a failing row in its query tile;
 * perf mode uses kernel_ms when times_own_kernels; cache_private turns the cache check off. */
typedef struct swa_dut_v2_traits {
  uint32_t struct_size;
  uint32_t params_size;     /* sizeof(swa_dut_v2_params) as the plugin was compiled: required */
  char name[64];            /* a short name for the console's tables: 1-32 of A-Z a-z 0-9 _ . + - (else unused) */
  uint32_t dtypes;          /* bit (1u << SWA_DUT_FP16) etc.; 0 = all */
  uint32_t modes;           /* bit (1u << SWA_DUT_DECODE) etc.; 0 = all */
  uint32_t cache_policies;  /* bit (1u << SWA_DUT_LINEAR) etc.; 0 = all */
  uint32_t mask_formats;    /* bit (1u << SWA_DUT_MASK_SWA_NORM) etc.; 0 = all */
  int32_t head_sizes[16];   /* the head sizes it runs, ascending; */
  int32_t head_size_count;  /* 0 = any */
  int32_t query_tile;       /* query rows per work tile (0: not stated) */
  int32_t key_tile;         /* keys per inner tile (0: not stated) */
  int32_t times_own_kernels; /* 1: it sets status->kernel_ms */
  int32_t cache_private;    /* 1: its cache layout is its own; the harness does not check it */
} swa_dut_v2_traits;

uint32_t swa_dut_v2_abi_version(void);
/* 0 on success. Called once per load, before anything else. */
int swa_dut_v2_describe(swa_dut_v2_traits* traits);
/* 1: run it; 0: skip, with the reason in status->message. */
int swa_dut_v2_supports(const swa_dut_v2_params* p, swa_dut_v2_status* status);
int swa_dut_v2_prefill(const swa_dut_v2_params* p, swa_dut_v2_status* status);
int swa_dut_v2_chunked_prefill(const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int chunk_index,
                               swa_dut_v2_status* status);
int swa_dut_v2_decode_step(const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int step, swa_dut_v2_status* status);

#ifdef __cplusplus
}
#endif

#endif /* SWA_DUT_V2_H */
