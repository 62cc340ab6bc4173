"""Batch G: a sliding-window attention kernel in NumPy, organised as a varlen FlashAttention port
(prefill and chunked prefill) plus a FlashInfer-style paged decode, and 26 faulty copies of it.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_g.py:attention
    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_g.py:fault_07

Written by an outside team from the public contract only (swa/dut_v2.h, dut/python/README.md,
numpy_kernel.py, harness/README.md, harness/FORMATS.md, golden/README.md, ../shared/seeds/).
`attention(p)` is the correct kernel; `fault_NN(p)` runs the very same code with exactly one change,
a branch on the fault's name at the one place it changes. FAULTS is the answer key.

How the kernel is organised
---------------------------
* Everything is float32 on the "device": scores, the softmax state (m, l) and the P.V accumulator.
  Only the per-row sink gate and the log-sum-exp are formed in float64.
* Prefill and chunked-prefill calls run ONE varlen kernel over the whole batch (FlashAttention's
  cu_seqlens layout): the queries of every sequence the call computes are packed into one buffer,
  and one key buffer holds, per sequence, a contiguous segment of key positions [klo, khi): the whole
  sequence in prefill; in a chunk call the cached keys still in the window (read back from the KV
  cache, FP8 decoded) followed by the chunk's own keys (quantised on load when the cache is FP8).
  Each query row carries its segment and its "diagonal": the index in the key buffer of the key at
  its own position (bottom-right alignment, kstart + pos - klo). The band test is made on buffer
  indices (qdiag - kidx), which equal position differences inside one segment, plus a segment test.
  With an ATB mask the mask alone decides (SWA_NORM: mask[pos_q, pos_k]; SWA_COMPRESS: decoded per
  element by the tile-walk rule of dut_v2.h at absolute positions, so chunks can use it too).
* The varlen kernel walks packed query tiles of 48 rows (GQA packed into the M dimension: a tile is
  48 rows x group query heads per KV head) against key tiles of 40 keys aligned to multiples of 40
  in the key buffer, from the tile holding the first row's oldest visible key to the tile holding
  the last row's newest. Q.K is summed over 64-dim blocks (the MMA's K step). Soft-cap is applied to
  the scaled scores. The online softmax is base e with FA4-style lazy rescaling: the running max is
  only moved when a tile raises it by more than TAU = 8, otherwise the stale max is kept for the
  tile's weights too (they may reach e^8).
* A chunk call reads the cache first, attends, then stores the chunk (rings keep the last W rows;
  RING_COMPACT fixes base at the first write; PAGED skips rows whose page is -1).
* Decode steps run a FlashInfer-style paged decode: each sequence first appends its token to the
  cache (a reshape_and_cache loop over KV heads), then attends to the cache alone over the keys
  [pos - window_left, pos], split by pages: the real pages of a PAGED cache, virtual pages of 16
  positions (aligned to absolute positions) for rings and LINEAR. Each page is one split described
  by (first page offset, last_page_len); splits are merged by a pairwise (tree) log-sum-exp merge.
  FP8 keys are read as raw code values: k_descale is folded into the score scale and v_descale is
  applied to the merged output (FlashInfer's k_scale / v_scale).
* Sinks are applied at the end of every path as a gate on the normalised output,
  out *= 1 / (1 + exp(sink - lse)), which equals adding exp(sink - m) to the denominator.
* FP8 has its own codec: encoding by float32 bit manipulation (round to nearest even on the bits,
  carry into the exponent, a separate rint path for subnormals, saturation by clamping the
  magnitude first); decoding through a 256-entry table.
"""
import numpy as np

QT = 48      # packed query rows per tile
KT = 40      # keys per key tile (aligned in the key buffer)
DB = 64      # dims per Q.K block
VPAGE = 16   # decode split size for ring and linear caches (virtual pages)
TAU = 8.0    # lazy rescale threshold, natural-log units

FAULTS = {
    "fault_01": "Varlen kernel (prefill and chunked-prefill calls, decode's prompt chunks included): the segment "
                "test (query and key from the same sequence) is omitted, visibility is the band on key-buffer "
                "indices (or the ATB mask on positions) alone; keys of a neighbouring sequence that lie in a key "
                "tile the query tile visits become visible: with a one-sided window the previous sequence's last "
                "keys for rows closer than window_left to their sequence's start (or any key of other segments "
                "whose positions the mask shows, with a mask), with a two-sided window also the next sequence's "
                "first keys; single-sequence calls and decode steps unaffected.",
    "fault_02": "Varlen kernel (prefill and chunk calls): the number of key tiles a query tile walks is computed "
                "from the length of its key range, (hi - lo) // 40 + 1, counted from lo's tile, instead of "
                "hi // 40 - lo // 40 + 1; whenever the range straddles one more 40-key boundary than its length "
                "implies, the tile holding the newest keys (the last rows' own and recent keys, the right side "
                "of two-sided windows) is never visited; decode steps unaffected.",
    "fault_03": "Varlen kernel's lazy (conditional) rescaling: when a key tile raises a row's running max by at "
                "most TAU = 8 the stale max is kept for l and the accumulator, but the tile's weights are "
                "computed with the NEW max exp(s - m_new) instead of the kept max, so that tile's keys are "
                "down-weighted by exp(m_kept - m_new) relative to the earlier tiles; rows whose visible keys lie "
                "in one tile, or whose max rises by more than TAU, are right; decode splits unaffected.",
    "fault_04": "Chunked-prefill calls (decode's prompt chunks included), bounded window: the diagonal offset of "
                "the chunk's queries in the key buffer assumes the cache supplies a full window, klo = begin - "
                "window_left without the clamp at 0 (the gather itself is clamped), so in every chunk with "
                "begin < window_left (chunk 0 always) each row's band is shifted window_left - begin keys to the "
                "right: rows see keys of the chunk after them and lose their oldest ones; with a mask (which "
                "uses positions) only the tile walk's key range is shifted, so masked rows can lose the keys "
                "below the first visited tile; unbounded windows, prefill and decode steps unaffected.",
    "fault_05": "Decode steps only: the valid length of the last page (split) is computed as (pos + 1) % P, "
                "FlashInfer's last_page_len without the `or P` case, so when the step's position is the last "
                "slot of its page ((pos + 1) % P == 0) the whole last page, the step's own token included, "
                "contributes nothing; P is page_size for PAGED (every step with page_size 1) and 16 for ring "
                "and linear caches (pos = 15, 31, ...); prefill and chunk calls unaffected.",
    "fault_06": "SWA_COMPRESS mask decoding (prefill and chunk calls): rule 1 (tile wholly hidden) is tested "
                "with the tile distance d = (qt - kt) * B >= W instead of the minimum pair distance "
                "d - (B - 1) >= W, so a key tile at distance d >= W that is still partly visible is hidden; "
                "rows at the start of a query block lose the keys of the block B * ceil(W / B) back (seen when "
                "W mod B != 1 and sequences are longer than that); SWA_NORM, unmasked cases and decode unaffected.",
    "fault_07": "Sinks in GQA (every mode, sink cases only): the sink is looked up with the query head's index "
                "inside its KV group, sinks[h % group], instead of sinks[h] (the packed-GQA kernel's local head "
                "index); every query head of KV head k > 0 uses group 0's sinks, and with heads_q == heads_kv "
                "every head uses sinks[0].",
    "fault_08": "FP8 e5m2 (every mode: quantise on load and cache writes): the encoder clamps magnitudes at "
                "e4m3's largest value 448 instead of e5m2's 57344 before rounding, so every quotient x / descale "
                "beyond 448 (most keys and values, descales being calibrated to e5m2's range) is stored and read "
                "as +-448 * descale; e4m3 and non-FP8 cases unaffected.",
    "fault_09": "Decode steps only: the split grid's upper end is the batch's newest position (max over the "
                "sequences of this step's position) instead of the sequence's own, so every shorter sequence "
                "also attends to cache positions after its step: zeros on a LINEAR cache (never written), the "
                "slots' older in-window positions again on rings (counted twice), stale or unwritten pool data "
                "on PAGED; the batch's longest sequence, batch 1, prefill and chunk calls unaffected.",
    "fault_10": "Two-sided windows with an unbounded left side (window 0, window_right > 0; prefill only): the "
                "band takes the causal fast path (kidx <= qdiag) when window_left < 0, dropping the keys right "
                "of the query; bounded two-sided windows and one-sided windows unaffected.",
    "fault_11": "Ring caches (modulo and compact), chunk writes with at least W storable rows: only the newest "
                "W - 1 rows are stored (lowest = end - W + 1 instead of end - W), reasoning that later queries "
                "never read the oldest one (true: outputs stay right), so that slot keeps an older position or "
                "zero, and a RING_COMPACT first write leaves slot 0 (position base) unwritten; only the cache "
                "check sees it; decode-step writes, linear and paged caches unaffected.",
    "fault_12": "Q.K over 64-dim blocks with the partial tail block dropped (every mode): scores use only the "
                "first floor(D / 64) * 64 dims, so head sizes 80, 96, 160, 192 score with 64, 64, 128, 128 dims; "
                "head sizes that are multiples of 64 unaffected, and so are rows with a single visible key and "
                "no sink.",
    "fault_13": "Decode steps only: the pairwise (tree) merge of the page splits drops the unpaired last state of "
                "a level with an odd number of states instead of carrying it to the next level, so a step with "
                "3, 5, 6, 7, ... splits loses its newest split(s), own token included; steps with 1, 2, 4, 8 "
                "splits unaffected.",
    "fault_14": "SWA_NORM mask in decode mode's prompt chunks: the flat mask is indexed with the longest PROMPT "
                "(max(seq_lens) - decode_steps) as its row stride instead of mask_rows (the longest sequence "
                "with its decode steps), flat[pos_q * Lp + pos_k], so every row after 0 reads a band shifted by "
                "decode_steps * pos_q columns; chunked_prefill mode (no decode steps), prefill, SWA_COMPRESS and "
                "the decode steps (band only) unaffected.",
    "fault_15": "Soft-cap dropped in fp32 runs (every mode): the score helper's dispatch takes the soft-cap "
                "branch only for the half-precision storage dtypes (fp16, bf16), so an fp32 run with softcap > 0 "
                "attends with the uncapped scores; fp16/bf16 runs and cases without soft-cap unaffected.",
    "fault_16": "FP8 encoder (every mode, both formats: quantise on load and cache writes): the rounding carry "
                "out of the mantissa is dropped, the exponent field comes from the value before rounding and the "
                "rounded mantissa is masked to its m bits, so a quotient in the top half-step of a binade that "
                "rounds up to the next power of two 2^(e+1) is stored as 2^e (half its value); subnormals and "
                "values that round down unaffected.",
    "fault_17": "Decode steps only, GQA: the paged decode loads the query once per KV head, the group's first "
                "query head, and uses it for every query head of the group, so query heads h with h % group != 0 "
                "output head (h - h % group)'s attention weights (with their own sinks); heads_q == heads_kv, "
                "prefill and chunk calls unaffected.",
    "fault_18": "Varlen kernel (prefill and chunk calls): the upper end of a query tile's key range is clamped to "
                "the end of the segment of the tile's FIRST row instead of its last row's, so in a query tile "
                "that straddles sequences the rows of every later sequence lose their keys beyond that point "
                "(most see no key and output 0, or only their keys inside the last visited tile); tiles inside "
                "one sequence and decode steps unaffected.",
    "fault_19": "Decode steps only: the offset of the first visible key inside its page, lo % P, is applied to "
                "every page of the window, not only the first one, so each later page (the last included) skips "
                "its first lo % P positions; P as for the decode splits (page_size for PAGED, 16 otherwise); "
                "steps whose window starts on a page boundary (and unbounded windows) unaffected.",
    "fault_20": "SWA_COMPRESS (prefill and chunk calls): the key range the tile walk visits is sized by the "
                "effective window T (mask_effective_window) instead of W = window_left + 1, lo = qdiag - (T - 1), "
                "so when W > T (W > 3B, or the rule's 2B + W % B) the keys between T and W behind the tile's "
                "first row are never visited and the tile's rows lose their oldest keys; W <= T, SWA_NORM and "
                "unmasked cases unaffected.",
    "fault_21": "Decode steps only: the step's own K/V are appended to the cache (reshape_and_cache) without the "
                "KV-head offset, every head is stored at head 0 (the last head's values win) and heads 1.. keep "
                "the slot's old contents; the cache check fails and attention reads the wrong own key/value for "
                "every KV head (the right one nowhere when heads_kv > 1), later steps the wrong older ones; "
                "heads_kv == 1 and chunk writes unaffected.",
    "fault_22": "Two-sided windows with a bounded left side (prefill): the left-edge test is made on the "
                "distance qdiag - kidx held as an unsigned integer, so a key right of the query (a negative "
                "distance) wraps to a huge distance and is hidden: a two-sided window behaves as one-sided; "
                "unbounded-left two-sided windows and one-sided windows unaffected.",
    "fault_23": "Varlen kernel's online softmax (prefill and chunk calls): each key tile's row maximum is taken "
                "over all columns but the tile's last one (an off-by-one loop bound); exact while the shift stays "
                "a shift, but a row whose only visible key in a tile is that last column while its running max is "
                "still -inf gets exp(+inf): its l becomes inf and then NaN, and the row outputs 0 (the l > 0 "
                "guard swallows the NaN) or NaN when no later tile follows; such rows are those whose window "
                "starts at a key-buffer index 39 mod 40 (with W = 1, rows at such indices); a last-column score "
                "far above the rest can also overflow; decode steps unaffected.",
    "fault_24": "Decode steps with an FP8 KV cache: the page gather dequantises V (code value * v_descale) while "
                "the epilogue still applies v_descale to the merged output (FlashInfer's v_scale), so decode "
                "rows come out multiplied by v_descale once more; K (descale folded into the score scale), "
                "prefill, chunk calls and non-FP8 cases unaffected.",
    "fault_25": "SWA_COMPRESS rule 4 (window-boundary tiles): the row offset is shortened by (W - T) / B, the "
                "shift counted in blocks, instead of by W - T positions, reading mask rows d - (W - T) / B + r; "
                "only where W > T (W - T a nonzero multiple of B): the boundary tiles read a band shifted by "
                "almost W - T rows, keys near the window's lower edge come out hidden or visible wrongly.",
    "fault_26": "FP8 encoder (every mode: quantise on load and cache writes): the subnormal path is taken below "
                "2^-bias instead of below the smallest normal 2^(1 - bias), so quotients in [2^-bias, 2^(1-bias)) "
                "(the top subnormal binade) go through the normal bit path and get exponent field 0 with a "
                "normal number's mantissa: their codes (and values read) lose the implicit bit and come out "
                "about half as large; data-dependent, only those few elements (e4m3: |x / descale| in "
                "[2^-7, 2^-6); for e5m2 the range [2^-15, 2^-14) is practically never hit); seen by the cache "
                "check, the outputs move far less than a tolerance.",
}


def describe():
    return {"name": "kernel_batch_g", "query_tile": QT, "key_tile": KT}


# ---------------------------------------------------------------------------------------------------
# Storage dtypes

def _f32(x, dtype):
    if dtype == "bf16":
        return (np.asarray(x).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(x).astype(np.float32)


def _store(out, rows, values, dtype):
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "bf16":
        bits = values.view(np.uint32).astype(np.uint64)
        out[rows] = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    else:
        out[rows] = values


# ---------------------------------------------------------------------------------------------------
# FP8 codec (OCP e4m3fn / e5m2, saturating)

_FP8 = {"fp8-e4m3": (3, 7, 448.0), "fp8-e5m2": (2, 15, 57344.0)}
_TABLES = {}


def _fp8_table(fmt):
    if fmt not in _TABLES:
        mb, bias, _ = _FP8[fmt]
        c = np.arange(256)
        e = (c >> mb) & ((1 << (7 - mb)) - 1)
        f = c & ((1 << mb) - 1)
        v = np.where(e == 0, f * 2.0 ** (1 - bias - mb),
                     ((1 << mb) + f) * np.exp2((e - bias - mb).astype(np.float64)))
        if fmt == "fp8-e4m3":
            v = np.where((c & 0x7F) == 0x7F, np.nan, v)
        else:
            v = np.where(e == 31, np.where(f == 0, np.inf, np.nan), v)
        _TABLES[fmt] = np.where(c & 0x80, -v, v).astype(np.float32)
    return _TABLES[fmt]


def _fp8_encode(x, fmt, fault):
    """FP8 codes of float32 x: nearest, ties to even, saturating."""
    mb, bias, fmax = _FP8[fmt]
    if fault == "fault_08":
        fmax = 448.0
    x = np.ascontiguousarray(x, dtype=np.float32)
    sign = ((x.view(np.uint32) >> 24) & 0x80).astype(np.int64)
    a = np.minimum(np.abs(x), np.float32(fmax))
    bits = np.ascontiguousarray(a).view(np.uint32).astype(np.int64)
    shift = 23 - mb
    r = (bits + ((1 << (shift - 1)) - 1) + ((bits >> shift) & 1)) >> shift
    if fault == "fault_16":
        normal = (((bits >> 23) - 127 + bias) << mb) | (r & ((1 << mb) - 1))
    else:
        normal = r - ((127 - bias) << mb)
    sub = np.rint(a.astype(np.float64) * 2.0 ** (bias + mb - 1)).astype(np.int64)
    edge = 2.0 ** (-bias) if fault == "fault_26" else 2.0 ** (1 - bias)
    code = np.where(a < edge, sub, normal)
    code = np.where(np.isnan(x), 0x7F, code | sign)
    return code.astype(np.uint8)


def _descales(p):
    if p.kv_format == "dtype":
        return 1.0, 1.0
    return float(p.k_descale), float(p.v_descale)


def _quantise(p, x, descale, fault):
    """Storage-dtype values x (float32) as attention reads them through FP8."""
    d = np.float32(descale)
    codes = _fp8_encode(x / d, p.kv_format, fault)
    return _fp8_table(p.kv_format)[codes] * d


# ---------------------------------------------------------------------------------------------------
# KV cache

def _slots(c, b, pos):
    """(first index, second index) into cache.k for positions pos of sequence b."""
    pos = np.asarray(pos, dtype=np.int64)
    if c.policy == "paged":
        return c.page_table[b][pos // c.page_size].astype(np.int64), pos % c.page_size
    if c.policy == "linear":
        slot = pos
    elif c.policy == "ring-modulo":
        slot = pos % c.slots
    else:
        slot = (pos - int(c.base[b])) % c.slots
    return np.full_like(pos, b), slot


def _read_cache(p, b, pos, dequantise_k=True, dequantise_v=True):
    """K and V [n, Hkv, D] float32 of positions pos from the cache (FP8 decoded; descaled on request)."""
    c = p.cache
    i0, i1 = _slots(c, b, pos)
    k, v = c.k[i0, i1], c.v[i0, i1]
    if c.kv_format == "dtype":
        return _f32(k, p.dtype), _f32(v, p.dtype)
    table = _fp8_table(c.kv_format)
    kd, vd = _descales(p)
    k, v = table[k], table[v]
    if dequantise_k:
        k = k * np.float32(kd)
    if dequantise_v:
        v = v * np.float32(vd)
    return k, v


def _encode_rows(p, rows, fault):
    k, v = p.k[rows], p.v[rows]
    if p.kv_format != "dtype":
        kd, vd = _descales(p)
        k = _fp8_encode(_f32(k, p.dtype) / np.float32(kd), p.kv_format, fault)
        v = _fp8_encode(_f32(v, p.dtype) / np.float32(vd), p.kv_format, fault)
    return k, v


def _store_chunk(p, b, begin, end, fault):
    """After a chunk call: positions [begin, end) of sequence b into the cache."""
    c = p.cache
    if c.policy == "ring-compact" and int(c.tokens_written[b]) == 0:
        c.base[b] = max(0, (end - begin) - int(c.slots))
    if c.policy in ("linear", "paged"):
        lowest = begin
    else:
        newest = end - int(c.slots) + (1 if fault == "fault_11" else 0)
        lowest = max(begin, newest, int(c.base[b]))
    pos = np.arange(lowest, end)
    i0, i1 = _slots(c, b, pos)
    keep = i0 >= 0
    k, v = _encode_rows(p, int(p.seq_offsets[b]) + pos[keep], fault)
    c.k[i0[keep], i1[keep]] = k
    c.v[i0[keep], i1[keep]] = v
    c.tokens_written[b] = end


def _append_token(p, b, pos, fault):
    """Decode step: reshape_and_cache of the step's token, head by head."""
    c = p.cache
    if c.policy == "ring-compact" and int(c.tokens_written[b]) == 0:
        c.base[b] = 0
    i0, i1 = _slots(c, b, np.array([pos]))
    i0, i1 = int(i0[0]), int(i1[0])
    if i0 >= 0:
        k, v = _encode_rows(p, np.array([int(p.seq_offsets[b]) + pos]), fault)
        for h in range(p.heads_kv):
            dst = 0 if fault == "fault_21" else h
            c.k[i0, i1, dst] = k[0, h]
            c.v[i0, i1, dst] = v[0, h]
    c.tokens_written[b] = pos + 1


# ---------------------------------------------------------------------------------------------------
# Shared score pieces

def _qk(q, k, fault):
    """q [..., M, D] . k [..., N, D] -> [..., M, N], float32, summed over 64-dim blocks."""
    d = q.shape[-1]
    stop = (d // DB) * DB if fault == "fault_12" else d
    s = np.zeros(q.shape[:-1] + (k.shape[-2],), dtype=np.float32)
    for d0 in range(0, stop, DB):
        d1 = min(d0 + DB, d)
        s += np.matmul(q[..., d0:d1], np.swapaxes(k[..., d0:d1], -1, -2))
    return s


def _softcap(p, s, fault):
    if not p.softcap > 0:
        return s
    if fault == "fault_15" and p.dtype not in ("fp16", "bf16"):
        return s
    cap = np.float32(p.softcap)
    return cap * np.tanh(s / cap)


def _sinks(p, fault):
    """[Hkv, group] float64 sink logits, or None."""
    if p.sinks is None:
        return None
    g = p.heads_q // p.heads_kv
    sinks = np.asarray(p.sinks, dtype=np.float64)
    if fault == "fault_07":
        return np.tile(sinks[:g], (p.heads_kv, 1))   # sinks[h % group]
    return sinks.reshape(p.heads_kv, g)


def _finish(acc, m, l, sink):
    """Normalised output and the sink gate. acc [..., D], m, l [...], sink broadcastable or None."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        o = np.where((l > 0)[..., None], acc / np.where(l > 0, l, 1)[..., None], 0).astype(np.float64)
        if sink is not None:
            lse = np.where(l > 0, m.astype(np.float64) + np.log(np.where(l > 0, l, 1).astype(np.float64)),
                           -np.inf)
            o = o * (1.0 / (1.0 + np.exp(sink - lse)))[..., None]
    return o


# ---------------------------------------------------------------------------------------------------
# Visibility in the varlen kernel

def _band(p, qd, kx, fault):
    diff = qd[:, None] - kx[None, :]
    left, right = int(p.window_left), int(p.window_right)
    if fault == "fault_10" and left < 0:
        return diff >= 0
    vis = np.ones(diff.shape, dtype=bool)
    if left >= 0:
        if fault == "fault_22":
            vis &= diff.astype(np.uint64) <= np.uint64(left)
        else:
            vis &= diff <= left
    if right >= 0:
        vis &= diff >= -right
    return vis


def _compress_visible(p, qpos, kpos, fault):
    """SWA_COMPRESS decoded per (query, key) pair by the tile-walk rule at absolute positions."""
    B = int(p.mask_block)
    W = int(p.window_left) + 1
    T = int(p.mask_effective_window)
    qt, kt = (qpos // B)[:, None], (kpos // B)[None, :]
    r, c = (qpos % B)[:, None], (kpos % B)[None, :]
    d = (qt - kt) * B
    if fault == "fault_06":
        hidden = (kt > qt) | (d >= W)
    else:
        hidden = (kt > qt) | (d - (B - 1) >= W)
    diag = qt == kt
    full = ~hidden & ~diag & (d + (B - 1) < W)
    shift = (W - T) // B if fault == "fault_25" else (W - T)
    row = np.where(diag, r, d - shift + r)
    read = ~hidden & ~full
    row = np.where(read, row, 0)
    col = np.where(read, c, 0)
    return ~hidden & (full | (p.mask[row, col] == 0))


def _visible(p, fault, qseg, qpos, qd, kseg, kpos, kx):
    if p.mask_format == "swa-norm":
        if fault == "fault_14" and p.mode == "decode":
            stride = int(np.max(p.seq_lens)) - int(p.decode_steps)
        else:
            stride = int(p.mask_rows)
        flat = np.asarray(p.mask).reshape(-1)
        vis = flat[qpos[:, None] * stride + kpos[None, :]] == 0
    elif p.mask_format == "swa-compress":
        vis = _compress_visible(p, qpos, kpos, fault)
    else:
        vis = _band(p, qd, kx, fault)
    if fault == "fault_01":
        return vis
    return vis & (qseg[:, None] == kseg[None, :])


# ---------------------------------------------------------------------------------------------------
# Prefill and chunked prefill: one varlen kernel over the batch

def _varlen_call(p, fault):
    left = int(p.window_left)
    qrows, qseg, qpos, qdiag = [], [], [], []
    ks, vs, kseg, kpos = [], [], [], []
    seg_start, seg_end, work = [], [], []
    nk = 0
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        off = int(p.seq_offsets[b])
        kd, vd = _descales(p)
        if p.cache is None:
            klo, khi = 0, int(p.seq_lens[b])
            kpositions = np.arange(klo, khi)
            k, v = _f32(p.k[off + kpositions], p.dtype), _f32(p.v[off + kpositions], p.dtype)
            if p.kv_format != "dtype":
                k, v = _quantise(p, k, kd, fault), _quantise(p, v, vd, fault)
            diag_lo = klo
        else:
            klo = 0 if left < 0 else max(0, begin - left)
            kc, vc = _read_cache(p, b, np.arange(klo, begin))
            own = off + np.arange(begin, end)
            kn, vn = _f32(p.k[own], p.dtype), _f32(p.v[own], p.dtype)
            if p.kv_format != "dtype":
                kn, vn = _quantise(p, kn, kd, fault), _quantise(p, vn, vd, fault)
            k, v = np.concatenate([kc, kn]), np.concatenate([vc, vn])
            khi = end
            kpositions = np.arange(klo, khi)
            diag_lo = (begin - left) if (fault == "fault_04" and left >= 0) else klo
        s_index = len(seg_start)
        seg_start.append(nk)
        seg_end.append(nk + len(kpositions))
        pos = np.arange(begin, end)
        qrows.append(off + pos)
        qseg.append(np.full(len(pos), s_index))
        qpos.append(pos)
        qdiag.append(nk + pos - diag_lo)
        ks.append(k)
        vs.append(v)
        kseg.append(np.full(len(kpositions), s_index))
        kpos.append(kpositions)
        nk += len(kpositions)
        work.append((b, begin, end))
    if not work:
        return
    qrows, qseg, qpos, qdiag = (np.concatenate(x) for x in (qrows, qseg, qpos, qdiag))
    K, V = np.concatenate(ks), np.concatenate(vs)
    kseg, kpos = np.concatenate(kseg), np.concatenate(kpos)
    kidx = np.arange(nk)
    seg_start, seg_end = np.array(seg_start), np.array(seg_end)

    hq, hkv, D = p.heads_q, p.heads_kv, p.head_size
    g = hq // hkv
    nq = len(qrows)
    Q = _f32(p.q[qrows], p.dtype)
    Qh = np.ascontiguousarray(Q.reshape(nq, hkv, g, D).transpose(1, 0, 2, 3))   # [Hkv, nq, g, D]
    Kh = np.ascontiguousarray(K.transpose(1, 0, 2))                               # [Hkv, nk, D]
    Vh = np.ascontiguousarray(V.transpose(1, 0, 2))
    O = np.zeros((hkv, nq, g, D), dtype=np.float64)
    sinks = _sinks(p, fault)
    scale = np.float32(p.scale)
    right = int(p.window_right)
    left_pick = left
    if fault == "fault_20" and p.mask_format == "swa-compress":
        left_pick = int(p.mask_effective_window) - 1

    for r0 in range(0, nq, QT):
        r1 = min(r0 + QT, nq)
        rows = r1 - r0
        s_first, s_last = qseg[r0], qseg[r1 - 1]
        lo = seg_start[s_first] if left_pick < 0 else max(seg_start[s_first], qdiag[r0] - left_pick)
        end_seg = s_first if fault == "fault_18" else s_last
        hi = seg_end[end_seg] - 1 if right < 0 else min(seg_end[end_seg] - 1, qdiag[r1 - 1] + right)
        q_t = Qh[:, r0:r1].reshape(hkv, rows * g, D)
        m = np.full((hkv, rows * g), -np.inf, dtype=np.float32)
        l = np.zeros((hkv, rows * g), dtype=np.float32)
        acc = np.zeros((hkv, rows * g, D), dtype=np.float32)
        if hi >= lo:
            t_first = lo // KT
            if fault == "fault_02":
                n_tiles = (hi - lo) // KT + 1
            else:
                n_tiles = hi // KT - t_first + 1
            for t in range(t_first, t_first + n_tiles):
                k0, k1 = t * KT, min((t + 1) * KT, nk)
                if k0 >= k1:
                    continue
                vis = _visible(p, fault, qseg[r0:r1], qpos[r0:r1], qdiag[r0:r1],
                               kseg[k0:k1], kpos[k0:k1], kidx[k0:k1])
                if not vis.any():
                    continue
                vis = np.repeat(vis, g, axis=0)[None]                    # [1, rows*g, keys]
                s = _qk(q_t, Kh[:, k0:k1], fault) * scale
                s = _softcap(p, s, fault)
                s = np.where(vis, s, np.float32(-np.inf))
                if fault == "fault_23":
                    m_tile = np.max(s[..., :-1], axis=-1, initial=-np.inf)
                else:
                    m_tile = s.max(axis=-1)
                m_new = np.maximum(m, m_tile)
                with np.errstate(invalid="ignore", over="ignore"):
                    move = (m_new - m) > TAU
                    m_use = np.where(move, m_new, m)
                    alpha = np.where(np.isneginf(m_use), np.float32(1), np.exp(m - m_use)).astype(np.float32)
                    shift = m_new if fault == "fault_03" else m_use
                    w = np.where(np.isneginf(s), np.float32(0), np.exp(s - shift[..., None])).astype(np.float32)
                l = l * alpha + w.sum(axis=-1, dtype=np.float32)
                acc = acc * alpha[..., None] + np.matmul(w, Vh[:, k0:k1])
                m = m_use
        sink = None if sinks is None else np.repeat(sinks[:, None, :], rows, axis=1).reshape(hkv, rows * g)
        O[:, r0:r1] = _finish(acc, m, l, sink).reshape(hkv, rows, g, D)
    out = O.transpose(1, 0, 2, 3).reshape(nq, hq, D).astype(np.float32)
    _store(p.out, qrows, out, p.dtype)
    if p.cache is not None:
        for b, begin, end in work:
            _store_chunk(p, b, begin, end, fault)


# ---------------------------------------------------------------------------------------------------
# Decode: FlashInfer-style paged decode with page splits and a tree merge

def _split_state(p, q, k, v, kscale, fault):
    """One split: q [Hkv, g, D], k/v [n, Hkv, D] -> (m, l, acc) with m, l [Hkv, g], acc [Hkv, g, D]."""
    hkv, g, D = q.shape
    if k.shape[0] == 0:
        return (np.full((hkv, g), -np.inf, np.float32), np.zeros((hkv, g), np.float32),
                np.zeros((hkv, g, D), np.float32))
    s = _qk(q, np.ascontiguousarray(k.transpose(1, 0, 2)), fault) * kscale
    s = _softcap(p, s, fault)
    m = s.max(axis=-1)
    w = np.exp(s - m[..., None]).astype(np.float32)
    return m, w.sum(axis=-1, dtype=np.float32), np.matmul(w, np.ascontiguousarray(v.transpose(1, 0, 2)))


def _merge(a, b):
    ma, la, xa = a
    mb, lb, xb = b
    m = np.maximum(ma, mb)
    with np.errstate(invalid="ignore"):
        wa = np.where(np.isneginf(ma), np.float32(0), np.exp(ma - m)).astype(np.float32)
        wb = np.where(np.isneginf(mb), np.float32(0), np.exp(mb - m)).astype(np.float32)
    return m, la * wa + lb * wb, xa * wa[..., None] + xb * wb[..., None]


def _tree_merge(states, fault):
    while len(states) > 1:
        nxt = [_merge(states[i], states[i + 1]) for i in range(0, len(states) - 1, 2)]
        if len(states) % 2 and fault != "fault_13":
            nxt.append(states[-1])
        states = nxt
    return states[0]


def _decode_call(p, fault):
    c = p.cache
    steps = []
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        _append_token(p, b, begin, fault)
        steps.append((b, begin))
    if not steps:
        return
    hq, hkv, D = p.heads_q, p.heads_kv, p.head_size
    g = hq // hkv
    left = int(p.window_left)
    P = int(c.page_size) if c.policy == "paged" else VPAGE
    kd, vd = _descales(p)
    kscale = np.float32(np.float32(p.scale) * np.float32(kd))
    sinks = _sinks(p, fault)
    newest = max(pos for _, pos in steps)
    for b, pos in steps:
        row = int(p.seq_offsets[b]) + pos
        q = _f32(p.q[row], p.dtype).reshape(hkv, g, D)
        if fault == "fault_17":
            q = np.repeat(q[:, :1], g, axis=1)
        lo = 0 if left < 0 else max(0, pos - left)
        upper = newest if fault == "fault_09" else pos
        first_lp, last_lp = lo // P, upper // P
        states = []
        for lp in range(first_lp, last_lp + 1):
            a = lo % P if (lp == first_lp or fault == "fault_19") else 0
            if lp == last_lp:
                e = (upper + 1) % P if fault == "fault_05" else upper % P + 1
            else:
                e = P
            kpos = lp * P + np.arange(a, e)
            k, v = _read_cache(p, b, kpos, dequantise_k=False, dequantise_v=(fault == "fault_24"))
            states.append(_split_state(p, q, k, v, kscale, fault))
        m, l, acc = _tree_merge(states, fault)
        o = _finish(acc * np.float32(vd), m, l, sinks)
        _store(p.out, np.array([row]), o.reshape(1, hq, D).astype(np.float32), p.dtype)


# ---------------------------------------------------------------------------------------------------
# Entry points

def _run(p, fault=None):
    if p.call == "decode_step":
        _decode_call(p, fault)
    else:
        _varlen_call(p, fault)


def attention(p):
    _run(p, None)


def _make_fault(name):
    def fault(p):
        _run(p, name)
    fault.__name__ = name
    fault.__doc__ = FAULTS[name]
    return fault


for _name in FAULTS:
    globals()[_name] = _make_fault(_name)
del _name
