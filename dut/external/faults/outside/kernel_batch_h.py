"""Outside batch H: a sliding-window attention kernel in NumPy laid out like a llama.cpp / ggml port.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_h.py:attention
    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_h.py:fault_07

Written by an outside team from the public contract only (swa/dut_v2.h, dut/python/README.md,
numpy_kernel.py, harness/README.md, harness/FORMATS.md, golden/README.md, ../shared/seeds/).
`attention(p)` is the correct kernel; `fault_NN(p)` runs the very same code with exactly one change,
a branch on the fault's name at the one place it changes. FAULTS is the answer key.

How the kernel is organised (the way llama.cpp drives ggml_flash_attn_ext on the CPU)
----------------------------------------------------------------------------------------
* A "graph" object lives for one schedule (it is made at the schedule's first call: the prefill, or
  chunk 0) and holds the op parameters of flash_attn_ext: scale, and with soft-capping the scale
  pre-divided by the cap (ggml's `scale /= softcap`, then `s = softcap * tanh(s)`). The parameters
  are set again at every call, as llama.cpp re-sets its graph inputs.
* Every call is split into one UBATCH per sequence (its rows [begin, end) of this call). For each
  ubatch the kernel builds, like llama.cpp's KV-cache "view" and its set_input():
  - a list of KV CELLS: K and V values (float64, FP8 decoded exactly) and the POSITION each cell
    holds (-1: empty). Prefill: the sequence's own keys. Chunked prefill: the cells the KV cache
    holds (rings: all W slots, each labelled with the position it holds, computed from
    tokens_written and base; linear and paged: the positions from the first row's oldest visible key
    to tokens_written, paged ones through the page table) followed by the chunk's own keys, STAGED
    from the inputs (through the FP8 codec when the cache is FP8), because the chunk is written into
    the cache after its attention. Decode: the step writes its token into the cache first, then the
    cells are the cache's alone. The list is padded with empty cells to a multiple of KV_PAD = 32.
  - the KQ MASK, a float16 tensor [rows padded to GGML_KQ_MASK_PAD = 32, cells] of 0 / -inf,
    rebuilt for every ubatch: an empty cell is hidden; without an ATB mask the band decides (right
    bound, and llama's standard SWA rule `i - j >= n_swa` with n_swa = window_left + 1; a prefill
    whose every sequence fits in the window takes a causal fast path); with an ATB mask the mask
    alone decides (SWA_NORM at absolute positions, SWA_COMPRESS decoded per pair by dut_v2.h's tile
    walk at absolute positions, which holds in chunks too). Padded query rows are wholly hidden.
* flash_attn_ext itself (ggml's CPU kernel, vectorised over the ubatch's rows and the query heads):
  Q.K per cell (a float32 dot, then the scale or the soft-cap), the mask added, and the cells walked
  in blocks of KV_BLOCK = 24 with an online softmax (running max M, sum S, accumulator VKQ, all
  float32; VKQ rescaled in register tiles of 128 dims); then ggml's sink fold (if the sink exceeds
  M, VKQ and S are rescaled by exp(M - sink), else exp(sink - M) joins S); then VKQ / S (0 when
  S == 0). A one-row ubatch (decode) goes through the same code (ggml's vec kernel).
* The result of the padded ubatch is written back for the ubatch's real rows only.
* Caches: ring-modulo (slot p mod W), ring-compact (base fixed at the first write), linear (slot p),
  paged (pool [pages, page_size, Hkv, D] through page_table; a row whose page is -1 is skipped).
  A chunk stores its last W rows into a ring, every row elsewhere. FP8: an arithmetic OCP codec
  (frexp exponent, rint mantissa: nearest, ties to even; saturating) and a 256-entry decode table.
"""
import numpy as np

KV_PAD = 32          # cells are padded to a multiple of this (llama.cpp pads n_kv)
KQ_MASK_PAD = 32     # rows of the KQ mask (GGML_KQ_MASK_PAD)
KV_BLOCK = 24        # cells per block of the flash_attn_ext walk
VKQ_TILE = 128       # dims per register tile of the VKQ accumulator

FAULTS = {
    "fault_01": (
        "KQ mask builder (every mode): the empty-cell test (cell position -1 hidden) is left out, so an "
        "empty cell is hidden only by the SWA rule i - (-1) >= n_swa; rows at positions i < window_left "
        "(i.e. i + 1 < W), and every row when the left side is unbounded (window 0, n_swa 0), attend to "
        "the empty cells: the KV_PAD padding of every cell list (zero K and V: weight exp(0 - M), value "
        "0) and a ring's unwritten slots; with an ATB mask the mask alone decides and an empty cell is "
        "looked up as a key position (SWA_NORM: the mask's last column, hidden except for the last row "
        "of the longest sequence; SWA_COMPRESS: position 0, visible to the rows whose window holds "
        "it)."),
    "fault_02": (
        "Write-back of the padded ubatch (chunked-prefill calls and decode steps, decode's prompt chunks "
        "included): the result of all GGML_KQ_MASK_PAD-padded rows (the real rows, then zeros for the "
        "padding rows, which see no cell) is copied to the packed output from the ubatch's first row on, "
        "so up to 31 rows after the ubatch's last row are overwritten with 0; rows of the same sequence "
        "computed later are rewritten, but the next sequences' rows computed earlier (their prompt rows "
        "in decode, the rows of sequences whose prompt is done in chunked prefill) stay 0; prefill (the "
        "sequences computed in order, each rewriting what the previous one spilled) and the batch's last "
        "sequence (past the tensor) unaffected."),
    "fault_03": (
        "fp16 runs only (every mode): the VKQ accumulator is held in fp16 when V is fp16, as ggml's CPU "
        "kernel does for an F16 V (VKQ16): each cell's v * weight is added with a rounding to fp16 per "
        "cell (ggml_vec_mad_f16) and the rescale by exp(M_old - M_new) is rounded to fp16 too; the "
        "normalisation by S then happens in fp32; the error grows with the number of visible cells: "
        "fp16 prefill fails for most windows of 16 and more, decode and chunk calls mostly stay "
        "within the limit (precision warnings); fp32 and bf16 runs unaffected."),
    "fault_04": (
        "Online softmax (every mode, every dtype): each cell's weight is taken from ggml's fp16 exp "
        "table, exp(s - M) evaluated at the argument rounded to fp16 and the result rounded to fp16 "
        "(ggml_table_exp_f16), instead of expf in fp32; the rescale factors of M and S stay fp32; a "
        "relative error up to about 2^-11 * (1 + |s - M|) per weight: far above fp32's tolerance "
        "(fp32 runs fail, except rows that see one key, W = 1), within fp16's and bf16's, whose "
        "same-precision baseline rounds its probabilities to the dtype too."),
    "fault_05": (
        "Decode steps only: the cell list is built as for a chunk, the cache's cells FOLLOWED by the "
        "step's own row staged from the inputs, although the step has already written that row into the "
        "cache (write-first): the step's own key and value are counted twice in every decode row (no "
        "change only where the window holds the own key alone, W = 1); prefill and chunk calls "
        "unaffected."),
    "fault_06": (
        "Soft-cap (every mode, soft-cap cases only): tanh is evaluated through one exponential in fp32, "
        "tanh(x) = (exp(2x) - 1) / (exp(2x) + 1), x = scale * q.k / cap. Two corners: for small |x| "
        "(a large cap, 50, over ordinary scores) exp(2x) - 1 cancels and tanh loses relative accuracy "
        "(errors of ~1e-7 relative in the scores: above fp32's tolerance, fp32 runs with cap 50 fail, "
        "fp16/bf16 runs do not see it); for x above about 44.4 exp(2x) overflows and inf / inf gives "
        "NaN (large-logit inputs with a small cap: the decode soft-cap 30 large-logit case outputs NaN); "
        "caps of 5 to 30 over ordinary scores are right."),
    "fault_07": (
        "Decode steps only, fp16 runs only: the vec kernel (one-row ubatch of a decode step) computes "
        "each Q.K dot in half2 arithmetic, as ggml's fattn-vec-f16 kernel does: two fp16 lanes (even "
        "and odd dims), each product fused into its lane's running sum with a rounding to fp16 per "
        "step, the two lanes then added in fp16; the score error grows with |q.k| (a few times the "
        "baseline's for N(0,1) inputs, far more for large logits); prefill and chunk calls (their "
        "dots in fp32) and other dtypes unaffected."),
    "fault_08": (
        "KQ mask reuse (every mode): the graph keeps the KQ mask it built for a (padded rows, padded "
        "cells) shape and hands it out again for every later ubatch of the same shape in the same "
        "schedule (llama.cpp's graph reuse without re-setting the mask input); correct only while the "
        "visibility pattern repeats: wrong for a sequence of a prefill batch whose padded shape equals "
        "an earlier sequence's (ragged lengths in the same 32-bucket: padding cells shown or real cells "
        "hidden), for chunks through a ring (the slots' labels rotate: early chunks' masks hide slots "
        "that later hold visible keys), and wherever the ramp-up phase's mask is reused; a single "
        "sequence whose calls all differ in shape, and full rings in steady-state decode, unaffected."),
    "fault_09": (
        "PAGED cache views (chunk calls' cached cells and decode steps): a cell is labelled with the "
        "position computed from its PHYSICAL page, phys * page_size + offset, instead of its logical "
        "page, j * page_size + offset (the K/V are read from the right place): the pool's page order is "
        "a permutation, so cached keys carry wrong positions and are hidden or shown by the window and "
        "the causal test wrongly; rings, linear caches and prefill unaffected; the cache bytes are "
        "right."),
    "fault_10": (
        "RING_COMPACT views only (chunk calls' cached cells and decode steps): the position each slot "
        "holds is computed with the ring-modulo formula, s + W * floor((tokens_written - 1 - s) / W), "
        "ignoring base[b], instead of base + s + W * floor((tokens_written - 1 - base - s) / W); "
        "identical when base mod W == 0 (base 0 included), otherwise every slot is labelled with a "
        "position off by the residue of base, so cached keys are hidden, shown or misplaced (a chunked "
        "prefill whose first chunk is longer than W with (chunk - W) mod W != 0); the cache bytes, "
        "base and tokens_written are right."),
    "fault_11": (
        "FP8 e4m3 decode table (every mode: prefill's quantise-on-load, the chunk's staged keys and every "
        "cached cell): the top exponent field (15) is decoded with IEEE semantics, mantissa 0 as inf and "
        "mantissas 1..6 as NaN, as for e5m2, instead of e4m3fn's finite values 256..448 (only 0x7f / "
        "0xff is NaN); every K or V element whose quotient |x / descale| rounds to 256 or more (the "
        "largest elements of every calibrated tensor) is read as inf / NaN and the rows that see them "
        "output NaN; the encoder and the cache bytes are right; e5m2 and non-FP8 cases unaffected."),
    "fault_12": (
        "Sink fold after the cell walk (every mode, sink cases only): when the sink logit exceeds the "
        "row's running max M, S is rescaled by exp(M - sink) and the sink's 1 added, but VKQ is not "
        "rescaled (the ggml_vec_scale of VKQ dropped); rows whose sink is below M are right, the others "
        "come out multiplied by exp(sink - M) (too large); data-dependent: heads whose sink outweighs "
        "the row's best score."),
    "fault_13": (
        "Cell-block walk (every mode): a block's cells are sliced [c0, c0 + KV_BLOCK + 1) (an inclusive "
        "end) while the walk still steps by KV_BLOCK = 24, so the first cell of every block after the "
        "first (cell indices 24, 48, ...) is also the last cell of the block before and enters the "
        "softmax twice; wrong whenever such a cell is visible to a row (in prefill, key positions that "
        "are multiples of 24; in chunks and decode, whatever cell sits at those indices)."),
    "fault_14": (
        "FP8 KV (every mode): the dequantised K/V cells (code value * descale, prefill's quantise-on-load "
        "and the chunk's staged keys included) are written into an fp16 cell buffer, as ggml keeps its "
        "converted cache views in F16, instead of being used exactly; the product, which needs up to 28 "
        "bits, is rounded to fp16's 11, a relative error up to 2^-11 per element: fp32 runs with an FP8 "
        "cache fail, fp16 and bf16 runs stay within their tolerance; non-FP8 cases unaffected."),
    "fault_15": (
        "Chunk calls and decode steps with a LINEAR or PAGED cache: the SWA window n_swa (the mask's "
        "i - j >= n_swa rule and the view's first position) is taken from the cache's slot count "
        "(cache.slots) instead of window_left + 1, which is right for the rings (slots = W) but is the "
        "longest sequence for LINEAR and table_width * page_size for PAGED, so the window is never "
        "applied there: a linear view shows every earlier position, a paged view every held position "
        "(those of the first held page below the window); prefill and ring caches unaffected."),
    "fault_16": (
        "SWA_COMPRESS decoding, rule 4 (window-boundary tiles, prefill and chunk calls): the compressed "
        "mask is read at row d - (W - T) + r and at column kt * B + c, the key's absolute column, "
        "instead of column c (the block read starts at column 0); for key tiles kt >= 1 the band is read "
        "shifted by kt * B columns, so boundary keys are hidden where they are visible (and vice "
        "versa); only sequences long enough to have boundary tiles with kt >= 1 (queries at positions "
        ">= 2B or so); rules 1-3, SWA_NORM and unmasked cases unaffected."),
    "fault_17": (
        "Chunked-prefill calls (decode's prompt chunks included): the extent of the cache view is taken "
        "from the ubatch (its end, as llama.cpp's cell metadata after apply_ubatch) instead of "
        "tokens_written, while the chunk's K/V are written only after the attention: a ring's slots that "
        "the chunk will overwrite are labelled with the chunk's positions but still hold the keys W "
        "back, a linear or paged view includes the chunk's own positions, not yet written (zeros or a "
        "page's previous contents); these cells duplicate the staged own keys with wrong data; decode "
        "steps (write-first) and prefill unaffected."),
    "fault_18": (
        "Soft-cap with a reused graph (chunk calls and decode steps after the schedule's first call, "
        "soft-cap cases only): the op-parameter setup `kq_scale /= softcap` is re-run on the graph's "
        "stored kq_scale at every call instead of being recomputed from p.scale, so call k uses "
        "scale / softcap^(k+1): the first call (the whole prefill, chunk 0) is right, every later call's "
        "scores are shrunk towards 0 under the cap."),
    "fault_19": (
        "Head sizes above 128 only (160, 192, 256; every mode): when a cell block raises a row's running "
        "max, VKQ is rescaled by exp(M_old - M_new) over its first register tile of 128 dims only (the "
        "rescale loop bound is the tile width instead of the head size), so dims 128.. keep the earlier "
        "blocks' contributions at the old scale; rows whose max never rises after their first visible "
        "block are right; head sizes <= 128 unaffected."),
    "fault_20": (
        "Prefill without an ATB mask: the causal fast path (the SWA rule left out of the mask when no "
        "row can lose a key to the window) is taken when n_swa >= L - 1 instead of n_swa >= L, L the "
        "longest sequence of the call: with W = L - 1 exactly, the last row of that sequence also sees "
        "key 0 (one key past its window); the window-edge case W = L - 1 only; chunk calls, decode and "
        "masked cases unaffected."),
    "fault_21": (
        "PAGED cache (chunk writes, decode writes and every view): a page table entry is taken as held "
        "when it is > 0 instead of >= 0, so physical page 0 is treated as 'no page' (llama.cpp-style "
        "cell ids start at 1): rows whose page is physical page 0 are never stored and keys there are "
        "never read; the cache check fails and the rows that should see those keys lose them, in "
        "whichever sequence and call the seeded page order hands out page 0; rings and linear caches "
        "unaffected."),
    "fault_22": (
        "Chunked-prefill calls (decode's prompt chunks included): the cell list's K/V are concatenated "
        "as [staged own keys, cached cells] while its positions are concatenated as [cached cells, "
        "staged own keys], so every cell carries another cell's position; a call whose cache view is "
        "empty (linear or paged chunk 0) is right, everything else reads K/V at wrong positions (a ring "
        "view always has W cells, empty ones included); prefill and decode unaffected."),
    "fault_23": (
        "Kernel dispatch by ubatch size (prefill and chunk calls): a one-row ubatch is taken for a "
        "decode step, whose own row is already in the cache, so its cell list is the cache's alone, "
        "without the staged own row: in prefill a sequence of length 1 sees no cell and outputs 0, in "
        "chunked prefill a one-row chunk (a prompt's last chunk of one row, a one-token prompt) loses "
        "its own key; decode steps and ubatches of 2+ rows unaffected."),
    "fault_24": (
        "Chunked-prefill calls (decode's prompt chunks included): the chunk's own rows are staged only "
        "over the rows the cache write will store (the rings' last W rows, the paged rows whose page is "
        "held, every row for LINEAR), reusing the write's row range, instead of every row of the chunk; "
        "in a chunk longer than the window (or a paged chunk with rows in pages no later reader sees) "
        "the dropped rows are keys the chunk's own queries need, so those rows lose their oldest "
        "in-chunk keys, their own included; chunks of at most W rows (paged: whose pages are all held), "
        "linear caches, prefill and decode steps unaffected."),
}


def describe():
    return {"name": "kernel_batch_h", "query_tile": KQ_MASK_PAD, "key_tile": KV_BLOCK}


# ---------------------------------------------------------------------------------------------------
# Storage dtypes

def _f64(x, dtype):
    """Storage values (bf16 arrives as its bits) to float64, exactly."""
    x = np.asarray(x)
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _store(values, dtype):
    """float32 values to the storage dtype, round to nearest even (bf16 as its bits)."""
    v = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "bf16":
        bits = v.view(np.uint32).astype(np.uint64)
        return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    if dtype == "fp16":
        return v.astype(np.float16)
    return v


# ---------------------------------------------------------------------------------------------------
# FP8 (OCP e4m3fn / e5m2): an arithmetic encoder and a decode table

def _fp8_spec(fmt):
    # mantissa bits, exponent bias, largest finite value
    return (3, 7, 448.0) if fmt == "fp8-e4m3" else (2, 15, 57344.0)


def _fp8_encode(x, fmt):
    """Codes of x (float64): nearest FP8 value, ties to even, saturating at the largest finite."""
    m_bits, bias, largest = _fp8_spec(fmt)
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    a = np.minimum(np.abs(np.where(nan, 0.0, x)), largest)
    _, e = np.frexp(a)                                  # a = f * 2^e, f in [0.5, 1)
    e = np.maximum(e - 1, 1 - bias)                     # binade exponent; subnormals share 1 - bias
    quantum = np.ldexp(1.0, e - m_bits)
    mant = np.rint(a / quantum)                         # 0 .. 2^(m+1), half to even
    carry = mant >= (1 << (m_bits + 1))
    e = np.where(carry, e + 1, e)
    mant = np.where(carry, mant / 2, mant).astype(np.int64)
    normal = mant >= (1 << m_bits)
    field = np.where(normal, e + bias, 0)
    code = (field << m_bits) | np.where(normal, mant - (1 << m_bits), mant)
    code = np.where(nan, 0x7F, code)
    return (code | np.where(np.signbit(x) & ~nan, 0x80, 0)).astype(np.uint8)


def _fp8_table(fmt, fault=None):
    """float64 value of each of the 256 codes."""
    m_bits, bias, _ = _fp8_spec(fmt)
    c = np.arange(256)
    field, mant = (c & 0x7F) >> m_bits, c & ((1 << m_bits) - 1)
    top = (1 << (7 - m_bits)) - 1
    v = np.where(field == 0, np.ldexp(mant.astype(np.float64), 1 - bias - m_bits),
                 np.ldexp(((1 << m_bits) + mant).astype(np.float64), field - bias - m_bits))
    if fmt == "fp8-e4m3" and fault != "fault_11":
        v = np.where((field == top) & (mant == (1 << m_bits) - 1), np.nan, v)
    else:  # IEEE-style specials in the top binade (e5m2's rule)
        v = np.where(field == top, np.where(mant == 0, np.inf, np.nan), v)
    return np.where(c & 0x80, -v, v)


def _kv_read(codes, descale, fmt, fault):
    """What attention reads from FP8 codes: code value * descale (exact in float64)."""
    return _fp8_table(fmt, fault)[codes] * np.float64(descale)


def _dequant_buffer(x, fault):
    """The cell buffer dequantised FP8 values go to."""
    if fault == "fault_14":
        return x.astype(np.float16).astype(np.float64)
    return x


# ---------------------------------------------------------------------------------------------------
# The graph: op parameters kept for one schedule

class _Graph:
    def __init__(self, p):
        self.kq_scale = np.float32(p.scale)
        self.masks = {}


_GRAPH = None


def _graph(p, fault):
    global _GRAPH
    first = p.call == "prefill" or (p.call == "chunked_prefill" and p.index == 0)
    if first or _GRAPH is None:
        _GRAPH = _Graph(p)
    g = _GRAPH
    # ggml_flash_attn_ext's op params: scale, pre-divided by the soft-cap
    if p.softcap > 0:
        if fault == "fault_18":
            if first:
                g.kq_scale = np.float32(p.scale)
            g.kq_scale = np.float32(g.kq_scale / np.float32(p.softcap))
        else:
            g.kq_scale = np.float32(np.float32(p.scale) / np.float32(p.softcap))
    else:
        g.kq_scale = np.float32(p.scale)
    return g


# ---------------------------------------------------------------------------------------------------
# The KV cache: slots, views, writes

def _n_swa(p, fault):
    """llama.cpp's n_swa: keys in the window including the query; 0 = no window."""
    if fault == "fault_15" and p.cache is not None and p.cache.policy in ("linear", "paged"):
        return int(p.cache.slots)
    return int(p.window_left) + 1 if p.window_left >= 0 else 0


def _page_held(page, fault):
    return page > 0 if fault == "fault_21" else page >= 0


def _ring_positions(c, b, tw, fault):
    """Position held by each of a ring's W slots after tw positions were written (-1: empty)."""
    W = int(c.slots)
    base = int(c.base[b]) if c.policy == "ring-compact" and fault != "fault_10" else 0
    s = np.arange(W, dtype=np.int64)
    pos = base + s + W * np.floor_divide(tw - 1 - base - s, W)
    return np.where((pos >= base) & (pos < tw), pos, -1)


def _cache_values(p, k, v, fault):
    """Cache contents (storage dtype or FP8 codes) to the values attention reads."""
    c = p.cache
    if c.kv_format != "dtype":
        return (_dequant_buffer(_kv_read(k, p.k_descale, c.kv_format, fault), fault),
                _dequant_buffer(_kv_read(v, p.v_descale, c.kv_format, fault), fault))
    return _f64(k, p.dtype), _f64(v, p.dtype)


def _cache_view(p, b, first_pos, view_end, fault):
    """The cells the cache holds for sequence b: (K, V, positions)."""
    c = p.cache
    n_swa = _n_swa(p, fault)
    lo = max(0, first_pos - (n_swa - 1)) if n_swa > 0 else 0
    if c.policy in ("ring-modulo", "ring-compact"):
        pos = _ring_positions(c, b, view_end, fault)
        k, v = _cache_values(p, c.k[b], c.v[b], fault)
        return k, v, pos
    if c.policy == "linear":
        pos = np.arange(lo, view_end, dtype=np.int64)
        k, v = _cache_values(p, c.k[b, lo:view_end], c.v[b, lo:view_end], fault)
        return k, v, pos
    # paged: walk the page table position by position
    P = int(c.page_size)
    pos = np.arange((lo // P) * P, view_end, dtype=np.int64)
    phys = c.page_table[b, pos // P].astype(np.int64)
    held = _page_held(phys, fault)
    pos, phys = pos[held], phys[held]
    k, v = _cache_values(p, c.k[phys, pos % P], c.v[phys, pos % P], fault)
    if fault == "fault_09":
        pos = phys * P + pos % P
    return k, v, pos


def _storable(p, b, begin, end, fault):
    """Rows [begin, end) of sequence b the cache write stores: a boolean per row."""
    c = p.cache
    pos = np.arange(begin, end, dtype=np.int64)
    if c.policy in ("ring-modulo", "ring-compact"):
        W = int(c.slots)
        base = int(c.base[b])
        if c.policy == "ring-compact" and c.tokens_written[b] == 0:
            base = max(0, (end - begin) - W)
        return pos >= max(begin, end - W, base if c.policy == "ring-compact" else 0)
    if c.policy == "linear":
        return np.ones(end - begin, dtype=bool)
    P = int(c.page_size)
    return _page_held(c.page_table[b, pos // P].astype(np.int64), fault)


def _write_cache(p, b, begin, end, fault):
    """Stores the K/V of positions [begin, end) of sequence b, then advances tokens_written."""
    c = p.cache
    keep = _storable(p, b, begin, end, fault)
    if c.policy == "ring-compact" and c.tokens_written[b] == 0:
        c.base[b] = max(0, (end - begin) - int(c.slots))
    pos = np.arange(begin, end, dtype=np.int64)[keep]
    rows = int(p.seq_offsets[b]) + pos
    k, v = p.k[rows], p.v[rows]
    if c.kv_format != "dtype":
        k = _fp8_encode(_f64(k, p.dtype) / np.float64(p.k_descale), c.kv_format)
        v = _fp8_encode(_f64(v, p.dtype) / np.float64(p.v_descale), c.kv_format)
    if c.policy == "paged":
        P = int(c.page_size)
        phys = c.page_table[b, pos // P].astype(np.int64)
        c.k[phys, pos % P], c.v[phys, pos % P] = k, v
    else:
        if c.policy == "linear":
            slot = pos
        else:
            base = int(c.base[b]) if c.policy == "ring-compact" else 0
            slot = (pos - base) % int(c.slots)
        c.k[b, slot], c.v[b, slot] = k, v
    c.tokens_written[b] = end


def _staged(p, b, begin, end, fault):
    """The call's own rows as attention reads them (through FP8 when the KV format says so)."""
    rows = int(p.seq_offsets[b]) + np.arange(begin, end)
    k, v = _f64(p.k[rows], p.dtype), _f64(p.v[rows], p.dtype)
    if p.kv_format != "dtype":
        k = _dequant_buffer(_kv_read(_fp8_encode(k / np.float64(p.k_descale), p.kv_format),
                                     p.k_descale, p.kv_format, fault), fault)
        v = _dequant_buffer(_kv_read(_fp8_encode(v / np.float64(p.v_descale), p.kv_format),
                                     p.v_descale, p.kv_format, fault), fault)
    return k, v, np.arange(begin, end, dtype=np.int64)


def _cells(p, b, begin, end, fault):
    """The ubatch's KV cells (K, V [n, Hkv, D] float64; positions [n], -1 empty), padded to KV_PAD."""
    if p.cache is None:  # prefill: the sequence's own keys
        if fault == "fault_23" and end - begin == 1:  # taken for a decode step: the cache alone
            k = np.zeros((0, p.heads_kv, p.head_size))
            k, v, pos = k, k, np.zeros(0, dtype=np.int64)
        else:
            k, v, pos = _staged(p, b, 0, int(p.seq_lens[b]), fault)
    else:
        decode = p.call == "decode_step"
        if fault == "fault_23":
            decode = end - begin == 1
        view_end = int(p.cache.tokens_written[b])
        if fault == "fault_17" and p.call == "chunked_prefill":
            view_end = end
        ck, cv, cpos = _cache_view(p, b, begin, view_end, fault)
        if decode and fault != "fault_05":
            k, v, pos = ck, cv, cpos
        else:
            sk, sv, spos = _staged(p, b, begin, end, fault)
            if fault == "fault_24":
                keep = _storable(p, b, begin, end, fault)
                sk, sv, spos = sk[keep], sv[keep], spos[keep]
            if fault == "fault_22":
                k, v = np.concatenate([sk, ck]), np.concatenate([sv, cv])
            else:
                k, v = np.concatenate([ck, sk]), np.concatenate([cv, sv])
            pos = np.concatenate([cpos, spos])
    n = len(pos)
    n_pad = -(-max(n, 1) // KV_PAD) * KV_PAD
    kp = np.zeros((n_pad, p.heads_kv, p.head_size))
    vp = np.zeros((n_pad, p.heads_kv, p.head_size))
    kp[:n], vp[:n] = k, v
    pp = np.full(n_pad, -1, dtype=np.int64)
    pp[:n] = pos
    return kp, vp, pp


# ---------------------------------------------------------------------------------------------------
# The KQ mask (llama.cpp's set_input), rebuilt for every ubatch

def _atb_hidden(p, i, j, fault):
    """ATB mask: True where the key is hidden (any nonzero value hides it)."""
    jj = np.maximum(j, -1)  # an empty cell's -1 reads the last column, as C pointer math would not
    if p.mask_format == "swa-norm":
        return p.mask[i, jj] != 0
    # swa-compress: dut_v2.h's tile walk, per pair, at absolute positions
    B, T, W = int(p.mask_block), int(p.mask_effective_window), int(p.window_left) + 1
    i, j = np.broadcast_arrays(i, np.maximum(j, 0))
    qt, kt = i // B, j // B
    d = (qt - kt) * B
    r, c = i - qt * B, j - kt * B
    hidden = np.ones(i.shape, dtype=bool)
    rule1 = (kt > qt) | (d - (B - 1) >= W)
    rule2 = ~rule1 & (qt == kt)
    rule3 = ~rule1 & ~rule2 & (d + (B - 1) < W)
    rule4 = ~rule1 & ~rule2 & ~rule3
    hidden[rule2] = p.mask[r[rule2], c[rule2]] != 0
    hidden[rule3] = False
    row4 = d[rule4] - (W - T) + r[rule4]
    col4 = c[rule4] + (kt[rule4] * B if fault == "fault_16" else 0)
    hidden[rule4] = p.mask[row4, col4] != 0
    return hidden


def _kq_mask(p, g, rows_pos, n_rows, cell_pos, fault):
    """float16 [rows padded to KQ_MASK_PAD, cells]: 0 visible, -inf hidden."""
    r_pad = -(-n_rows // KQ_MASK_PAD) * KQ_MASK_PAD
    key = (r_pad, len(cell_pos))
    if fault == "fault_08" and key in g.masks:
        return g.masks[key]
    i = rows_pos[:, None]
    j = cell_pos[None, :]
    hidden = np.zeros((n_rows, len(cell_pos)), dtype=bool)
    if fault != "fault_01":
        hidden |= j < 0
    if p.mask is not None:
        hidden |= _atb_hidden(p, i, j, fault)
    else:
        if p.window_right >= 0:
            hidden |= j - i > p.window_right
        n_swa = _n_swa(p, fault)
        fast = False
        if p.cache is None:  # causal fast path: no row of the call can lose a key to the window
            longest = int(np.max(p.seq_lens))
            fast = n_swa >= (longest - 1 if fault == "fault_20" else longest)
        if n_swa > 0 and not fast:
            hidden |= i - j >= n_swa
    mask = np.full((r_pad, len(cell_pos)), -np.inf, dtype=np.float16)
    mask[:n_rows] = np.where(hidden, np.float16(-np.inf), np.float16(0))
    if fault == "fault_08":
        g.masks[key] = mask
    return mask


# ---------------------------------------------------------------------------------------------------
# flash_attn_ext

def _tanh(x, fault):
    if fault == "fault_06":
        e = np.exp(np.float32(2) * x)
        return (e - np.float32(1)) / (e + np.float32(1))
    return np.tanh(x)


def _dot_f16_lanes(q, k):
    """A half2 dot (fattn-vec-f16): 2 fp16 lanes with fused steps, then the lanes added in fp16."""
    # q [H, R, D], k [H, N, D] -> [H, R, N]
    H, R, D = q.shape
    N = k.shape[1]
    qh = q.astype(np.float16).astype(np.float64)
    kh = k.astype(np.float16).astype(np.float64)
    acc = np.zeros((H, R, N, 2), dtype=np.float16)
    for d0 in range(0, D, 2):
        prod = qh[:, :, None, d0:d0 + 2] * kh[:, None, :, d0:d0 + 2]
        acc = (acc.astype(np.float64) + prod).astype(np.float16)
    while acc.shape[-1] > 1:
        h = acc.shape[-1] // 2
        acc = (acc[..., :h].astype(np.float32) + acc[..., h:].astype(np.float32)).astype(np.float16)
    return acc[..., 0].astype(np.float64)


def _flash_attn_ext(p, g, q, k, v, mask, fault):
    """q [R, Hq, D] float64; k, v [N, Hkv, D] float64; mask float16 [R_pad >= R, N] -> [R, Hq, D]."""
    R, Hq, D = q.shape
    group = Hq // p.heads_kv
    kv_head = np.arange(Hq) // group
    qh = np.ascontiguousarray(q.transpose(1, 0, 2))                 # [Hq, R, D]
    kh = np.ascontiguousarray(k[:, kv_head].transpose(1, 0, 2))     # [Hq, N, D]
    vh = np.ascontiguousarray(v[:, kv_head].transpose(1, 0, 2))
    mv = mask[:R].astype(np.float32)[None]                          # [1, R, N]
    N = k.shape[0]
    softcap = np.float32(p.softcap)
    f16_vkq = fault == "fault_03" and p.dtype == "fp16"
    vec_f16 = fault == "fault_07" and p.call == "decode_step" and p.dtype == "fp16"
    M = np.full((Hq, R), -np.inf, dtype=np.float32)
    S = np.zeros((Hq, R), dtype=np.float32)
    VKQ = np.zeros((Hq, R, D), dtype=np.float16 if f16_vkq else np.float32)
    for c0 in range(0, N, KV_BLOCK):
        c1 = min(c0 + KV_BLOCK + (1 if fault == "fault_13" else 0), N)
        if vec_f16:
            dot = _dot_f16_lanes(qh, kh[:, c0:c1]).astype(np.float32)
        else:
            dot = np.matmul(qh, kh[:, c0:c1].transpose(0, 2, 1)).astype(np.float32)
        if softcap > 0:
            s = softcap * _tanh(dot * g.kq_scale, fault)
        else:
            s = dot * g.kq_scale
        s = s + mv[:, :, c0:c1]
        m_new = np.maximum(M, s.max(axis=2))
        ref = np.where(np.isfinite(m_new), m_new, np.float32(0))
        ms = np.exp(M - ref)                                        # 0 while M is -inf
        if fault == "fault_04":
            w = np.exp((s - ref[..., None]).astype(np.float16).astype(np.float32))
            w = w.astype(np.float16).astype(np.float32)
        else:
            w = np.exp(s - ref[..., None])
        S = S * ms + w.sum(axis=2, dtype=np.float32)
        if f16_vkq:  # ggml's VKQ16: scale, then one mad per cell, each rounded to fp16
            acc = (VKQ.astype(np.float32) * ms[..., None]).astype(np.float16)
            for n in range(c1 - c0):
                step = w[:, :, n, None].astype(np.float64) * vh[:, None, c0 + n, :]
                acc = (acc.astype(np.float64) + step).astype(np.float16)
            VKQ = acc
        else:
            dims = min(D, VKQ_TILE) if fault == "fault_19" else D
            for d0 in range(0, dims, VKQ_TILE):
                VKQ[..., d0:d0 + VKQ_TILE] *= ms[..., None]
            VKQ += np.matmul(w.astype(np.float64), vh[:, c0:c1]).astype(np.float32)
        M = m_new
    VKQ = VKQ.astype(np.float32)
    if p.sinks is not None:  # ggml's sink fold
        sink = np.asarray(p.sinks, dtype=np.float32)[:, None]
        above = sink > M
        ms = np.where(above, np.exp(np.where(above, M - sink, 0)), np.float32(1))
        vs = np.where(above, np.float32(1), np.exp(np.where(above, 0, sink - M)))
        if fault != "fault_12":
            VKQ = VKQ * ms[..., None]
        S = S * ms + vs
    s_inv = np.where(S == 0, np.float32(0), np.float32(1) / np.where(S == 0, np.float32(1), S))
    out = VKQ * s_inv[..., None]
    return out.transpose(1, 0, 2)


# ---------------------------------------------------------------------------------------------------
# One call of the schedule

def _run(p, fault=None):
    g = _graph(p, fault)
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        if p.call == "decode_step":
            _write_cache(p, b, begin, end, fault)   # the step's token first, then attend
        first_row = int(p.seq_offsets[b])
        n_rows = end - begin
        k, v, cell_pos = _cells(p, b, begin, end, fault)
        rows_pos = np.arange(begin, end, dtype=np.int64)
        mask = _kq_mask(p, g, rows_pos, n_rows, cell_pos, fault)
        r_pad = mask.shape[0]
        q = np.zeros((r_pad, p.heads_q, p.head_size))
        q[:n_rows] = _f64(p.q[first_row + begin:first_row + end], p.dtype)
        out = _flash_attn_ext(p, g, q, k, v, mask, fault)
        if fault == "fault_02" and p.cache is not None:
            dst = p.out[first_row + begin:first_row + begin + r_pad]
            dst[...] = _store(out[:dst.shape[0]], p.dtype)
        else:
            p.out[first_row + begin:first_row + end] = _store(out[:n_rows], p.dtype)
        if p.call == "chunked_prefill":
            _write_cache(p, b, begin, end, fault)   # the chunk's K/V after its attention
    return None


def attention(p):
    return _run(p, None)


def _make_fault(name):
    def fault(p):
        return _run(p, name)
    fault.__name__ = name
    fault.__doc__ = FAULTS[name]
    return fault


for _name in FAULTS:
    globals()[_name] = _make_fault(_name)
